// AVX-512 version of GdnHeadStep and GdnHeadSteps for S % 32 == 0 (kernels/gdn.h), GDN and KDA tokens,
// compiled with -mavx512f -mavx512dq -ffp-contract=off and only called after the CPU check in gdn.cc. It
// gives the bits of the AVX2 and portable code: a 16-lane register holds two of DotF32's 8-lane accumulators
// (lanes 0-7 = acc0 over elements i..i+7, lanes 8-15 = acc1 over i+8..i+15, and likewise acc2 | acc3), so
// every lane does the same FMAs in the same order; the final sum splits them back and adds (acc0 + acc1) +
// (acc2 + acc3), then the fixed lane order. The decay (one value, or one per key channel for KDA) and the
// rank-1 update are a plain multiply and a multiply then an add, as in the portable loop.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <span>

#include "kernels/gdn.h"

namespace rw::kernels::gdn_avx512 {
namespace {

inline float Reduce(__m512 a01, __m512 a23) {
  const __m256 a0 = _mm512_castps512_ps256(a01), a1 = _mm512_extractf32x8_ps(a01, 1);
  const __m256 a2 = _mm512_castps512_ps256(a23), a3 = _mm512_extractf32x8_ps(a23, 1);
  const __m256 s = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
  __m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
  h = _mm_add_ps(h, _mm_movehl_ps(h, h));
  h = _mm_add_ss(h, _mm_movehdup_ps(h));
  return _mm_cvtss_f32(h) + 0.0f;  // DotF32's (empty) scalar tail: keeps a -0.0 sum at +0.0 like the others
}

// The decay of elements [i, i + 16): the broadcast vd (GDN), or dv[i..i+15] (KDA, kVec).
template <bool kVec>
inline __m512 DecayAt(__m512 vd, const float* dv, int32_t i) {
  if constexpr (kVec) return _mm512_loadu_ps(dv + i);
  return vd;
}

}  // namespace

// GCC 12's AVX-512 headers start extracts from _mm512_undefined_*(), which -Wmaybe-uninitialized flags.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
namespace {

template <bool kVec>
void HeadStepRows(float* M, const float* q, const float* k, const float* v, float beta, float decay, float scale,
                  int32_t S, float* o, const float* M_in, int32_t rows, const float* dv) {
  const __m512 vd = _mm512_set1_ps(decay);
  for (int32_t j = 0; j < rows; ++j) {
    float* row = M + static_cast<int64_t>(j) * S;
    const float* src = M_in + static_cast<int64_t>(j) * S;  // the decay reads the state from here (maybe row)
    __m512 a01 = _mm512_setzero_ps(), a23 = _mm512_setzero_ps();
    for (int32_t i = 0; i < S; i += 32) {
      const __m512 r0 = _mm512_mul_ps(_mm512_loadu_ps(src + i), DecayAt<kVec>(vd, dv, i));
      const __m512 r1 = _mm512_mul_ps(_mm512_loadu_ps(src + i + 16), DecayAt<kVec>(vd, dv, i + 16));
      _mm512_storeu_ps(row + i, r0);
      _mm512_storeu_ps(row + i + 16, r1);
      a01 = _mm512_fmadd_ps(r0, _mm512_loadu_ps(k + i), a01);
      a23 = _mm512_fmadd_ps(r1, _mm512_loadu_ps(k + i + 16), a23);
    }
    const __m512 vc = _mm512_set1_ps((v[j] - Reduce(a01, a23)) * beta);
    a01 = _mm512_setzero_ps();
    a23 = _mm512_setzero_ps();
    for (int32_t i = 0; i < S; i += 32) {
      const __m512 n0 = _mm512_add_ps(_mm512_loadu_ps(row + i), _mm512_mul_ps(_mm512_loadu_ps(k + i), vc));
      const __m512 n1 =
          _mm512_add_ps(_mm512_loadu_ps(row + i + 16), _mm512_mul_ps(_mm512_loadu_ps(k + i + 16), vc));
      _mm512_storeu_ps(row + i, n0);
      _mm512_storeu_ps(row + i + 16, n1);
      if (o != nullptr) {
        a01 = _mm512_fmadd_ps(n0, _mm512_loadu_ps(q + i), a01);
        a23 = _mm512_fmadd_ps(n1, _mm512_loadu_ps(q + i + 16), a23);
      }
    }
    if (o != nullptr) o[j] = Reduce(a01, a23) * scale;
  }
}

}  // namespace

void HeadStep(float* M, const float* q, const float* k, const float* v, float beta, float decay, float scale,
              int32_t S, float* o, const float* M_in, int32_t rows, const float* decay_vec) {
  if (decay_vec != nullptr) return HeadStepRows<true>(M, q, k, v, beta, decay, scale, S, o, M_in, rows, decay_vec);
  HeadStepRows<false>(M, q, k, v, beta, decay, scale, S, o, M_in, rows, nullptr);
}

namespace {

// kR state rows of kNC 32-float chunks held in registers through every token: the row is loaded once and stored
// once per call, not once per token. Each row gets HeadStep's operations in the same order (same bits).
template <int kNC, int kR, bool kVec>
void RowsThroughTokens(float* M, const float* M_in, int32_t S, int32_t j0, std::span<const GdnToken> tokens,
                       const float* decay, float scale) {
  __m512 st[kR][2 * kNC];
  #pragma GCC unroll 16
  for (int r = 0; r < kR; ++r) {
    const float* src = M_in + static_cast<int64_t>(j0 + r) * S;
    #pragma GCC unroll 16
    for (int c = 0; c < 2 * kNC; ++c) st[r][c] = _mm512_loadu_ps(src + 16 * c);
  }
  for (size_t t = 0; t < tokens.size(); ++t) {
    const GdnToken& x = tokens[t];
    const __m512 vd = _mm512_set1_ps(decay[t]);  // kVec: unused, x.decay holds one decay per channel
    __m512 a01[kR], a23[kR];
    auto clear = [&] {
      #pragma GCC unroll 16
      for (int r = 0; r < kR; ++r) a01[r] = a23[r] = _mm512_setzero_ps();
    };
    clear();
    #pragma GCC unroll 16
    for (int c = 0; c < kNC; ++c) {
      const __m512 k0 = _mm512_loadu_ps(x.k + 32 * c), k1 = _mm512_loadu_ps(x.k + 32 * c + 16);
      const __m512 d0 = DecayAt<kVec>(vd, x.decay, 32 * c), d1 = DecayAt<kVec>(vd, x.decay, 32 * c + 16);
      #pragma GCC unroll 16
      for (int r = 0; r < kR; ++r) {
        st[r][2 * c] = _mm512_mul_ps(st[r][2 * c], d0);
        st[r][2 * c + 1] = _mm512_mul_ps(st[r][2 * c + 1], d1);
        a01[r] = _mm512_fmadd_ps(st[r][2 * c], k0, a01[r]);
        a23[r] = _mm512_fmadd_ps(st[r][2 * c + 1], k1, a23[r]);
      }
    }
    __m512 vc[kR];
    #pragma GCC unroll 16
    for (int r = 0; r < kR; ++r) vc[r] = _mm512_set1_ps((x.v[j0 + r] - Reduce(a01[r], a23[r])) * x.beta);
    clear();
    #pragma GCC unroll 16
    for (int c = 0; c < kNC; ++c) {
      const __m512 k0 = _mm512_loadu_ps(x.k + 32 * c), k1 = _mm512_loadu_ps(x.k + 32 * c + 16);
      #pragma GCC unroll 16
      for (int r = 0; r < kR; ++r) {
        st[r][2 * c] = _mm512_add_ps(st[r][2 * c], _mm512_mul_ps(k0, vc[r]));
        st[r][2 * c + 1] = _mm512_add_ps(st[r][2 * c + 1], _mm512_mul_ps(k1, vc[r]));
      }
      if (x.o != nullptr) {
        const __m512 q0 = _mm512_loadu_ps(x.q + 32 * c), q1 = _mm512_loadu_ps(x.q + 32 * c + 16);
        #pragma GCC unroll 16
        for (int r = 0; r < kR; ++r) {
          a01[r] = _mm512_fmadd_ps(st[r][2 * c], q0, a01[r]);
          a23[r] = _mm512_fmadd_ps(st[r][2 * c + 1], q1, a23[r]);
        }
      }
    }
    if (x.o != nullptr) {
      #pragma GCC unroll 16
      for (int r = 0; r < kR; ++r) x.o[j0 + r] = Reduce(a01[r], a23[r]) * scale;
    }
  }
  #pragma GCC unroll 16
  for (int r = 0; r < kR; ++r) {
    float* row = M + static_cast<int64_t>(j0 + r) * S;
    #pragma GCC unroll 16
    for (int c = 0; c < 2 * kNC; ++c) _mm512_storeu_ps(row + 16 * c, st[r][c]);
  }
}

// Tokens in pieces of 16, whose k, q and v (24 KiB at S = 128) stay in L1 while every row group goes through them.
template <int kNC, bool kVec>
void AllRowsThroughTokens(float* M, const float* M_in, int32_t S, std::span<const GdnToken> tokens,
                          const float* decay, float scale) {
  constexpr int kR = kNC == 4 ? 2 : 4;  // rows per group: as many as the 32 registers hold with k and the sums
  constexpr size_t kPiece = 16;
  for (size_t t0 = 0; t0 < tokens.size(); t0 += kPiece) {
    const auto piece = tokens.subspan(t0, std::min(kPiece, tokens.size() - t0));
    const float* src = t0 == 0 ? M_in : M;
    int32_t j = 0;
    for (; j + kR <= S; j += kR) {
      // The rows 4 KiB ahead (past the end: the next head's state, which follows). A state row is 8 cache
      // lines, too few for the hardware prefetcher to run ahead on its own: this halves a decode step's delta
      // rule (288 heads of the 0.8B model: 1.8 -> 0.9 ms on one thread) and the cost of a second token.
      const char* ahead = reinterpret_cast<const char*>(src + static_cast<int64_t>(j) * S) + 4096;
      for (int32_t b = 0; b < kR * S * 4; b += 64) _mm_prefetch(ahead + b, _MM_HINT_T0);
      RowsThroughTokens<kNC, kR, kVec>(M, src, S, j, piece, decay + t0, scale);
    }
    for (; j < S; ++j) RowsThroughTokens<kNC, 1, kVec>(M, src, S, j, piece, decay + t0, scale);
  }
}

template <bool kVec>
bool HeadStepsOf(float* M, const float* M_in, int32_t S, std::span<const GdnToken> tokens, const float* decay,
                 float scale) {
  switch (S) {
    case 32: AllRowsThroughTokens<1, kVec>(M, M_in, S, tokens, decay, scale); return true;
    case 64: AllRowsThroughTokens<2, kVec>(M, M_in, S, tokens, decay, scale); return true;
    case 128: AllRowsThroughTokens<4, kVec>(M, M_in, S, tokens, decay, scale); return true;
    default: return false;
  }
}

}  // namespace

// The tokens all have a decay vector (KDA) or none (GDN: decay[t] is token t's).
bool HeadSteps(float* M, const float* M_in, int32_t S, std::span<const GdnToken> tokens, const float* decay,
               float scale) {
  if (tokens[0].decay != nullptr) return HeadStepsOf<true>(M, M_in, S, tokens, decay, scale);
  return HeadStepsOf<false>(M, M_in, S, tokens, decay, scale);
}
#pragma GCC diagnostic pop

}  // namespace rw::kernels::gdn_avx512
