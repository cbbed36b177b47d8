// Internal to kernels/gemm_avx2.cc (included only there): the 256-bit AVX2 tile kernels. A tile is R weight
// rows x T tokens with R*T independent accumulators. For each element (r, t) the float operations are exactly
// those of the R = T = 1 kernel, which are those of kernels/vec_dot_avx2.cc: integer block sums are exact
// whatever instructions produce them as long as each int32 lane sums the same products (same lane layout), and
// the float part is one FMA per block with the same operands, then the same Hsum.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "gguf/quants.h"
#include "kernels/avx2_blocks.h"

namespace rw::kernels::gemm_avx2 {
namespace {

using gguf::BlockQ4_K;
using gguf::BlockQ5_K;
using gguf::BlockQ6_K;
using gguf::BlockQ8_0;
using gguf::BlockQ8_K;
using gguf::TensorType;
using namespace avx2_blocks;  // Hsum, loads, K-quant scale and Q6_K unpacking


// ---- Tile kernels: w[R] row pointers, a[T] activation pointers, out[R][T] --------------------------------

struct KQ8_0 {
  static constexpr int kR = 2, kT = 4;
  template <int R, int T>
  static void Run(int64_t nb, const uint8_t* const* w, const uint8_t* const* act, float* out) {
    __m256 acc[R][T];
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; ++i) {
      float da[T];
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) da[t] = H2F(reinterpret_cast<const BlockQ8_0*>(act[t])[i].d);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const auto* x = reinterpret_cast<const BlockQ8_0*>(w[r]) + i;
        const __m256i xw = Load256(x->qs);
        const __m256i ax = _mm256_sign_epi8(xw, xw);
        const float dw = H2F(x->d);
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          const __m256i qa = Load256(reinterpret_cast<const BlockQ8_0*>(act[t])[i].qs);
          const __m256 d = _mm256_set1_ps(dw * da[t]);
          const __m256i s = DotUnsigned(ax, _mm256_sign_epi8(qa, xw));
          acc[r][t] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(s), acc[r][t]);
        }
      }
    }
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) out[r * T + t] = Hsum(acc[r][t]);
  }
};


template <bool kFive>
struct KQx_K {
  static constexpr int kR = 1, kT = 4;
  template <int R, int T>
  static void Run(int64_t nb, const uint8_t* const* w, const uint8_t* const* act, float* out) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i one = _mm256_set1_epi8(1);
    __m256 acc[R][T];
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; ++i) {
      const BlockQ8_K* y[T];
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) y[t] = reinterpret_cast<const BlockQ8_K*>(act[t]) + i;
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const uint8_t* qs;
        const uint8_t* packed;
        uint16_t dw, dminw;
        __m256i hbits = _mm256_setzero_si256();
        if constexpr (kFive) {
          const auto* x = reinterpret_cast<const BlockQ5_K*>(w[r]) + i;
          qs = x->qs;
          packed = x->scales;
          dw = x->d;
          dminw = x->dmin;
          hbits = Load256(x->qh);
        } else {
          const auto* x = reinterpret_cast<const BlockQ4_K*>(w[r]) + i;
          qs = x->qs;
          packed = x->scales;
          dw = x->d;
          dminw = x->dmin;
        }
        uint32_t utmp[4];
        UnpackScalesMins(packed, utmp);
        const __m128i scmn = _mm_set_epi32(static_cast<int>(utmp[3]), static_cast<int>(utmp[2]),
                                           static_cast<int>(utmp[1]), static_cast<int>(utmp[0]));
        const __m256i sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(scmn));
        __m256i sumi[T];
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) sumi[t] = _mm256_setzero_si256();
#pragma GCC unroll 4
        for (int c = 0; c < 4; ++c) {
          const __m256i q = Load256(qs + 32 * c);
          __m256i lo = _mm256_and_si256(q, m4);
          __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
          if constexpr (kFive) {
            lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hbits, 2 * c), one), 4));
            hi = _mm256_or_si256(
                hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hbits, 2 * c + 1), one), 4));
          }
          const __m256i slo = _mm256_shuffle_epi8(sc16, ScaleShuffle(2 * c));
          const __m256i shi = _mm256_shuffle_epi8(sc16, ScaleShuffle(2 * c + 1));
#pragma GCC unroll 4
          for (int t = 0; t < T; ++t) {
            const __m256i plo = _mm256_maddubs_epi16(lo, Load256(y[t]->qs + 64 * c));
            const __m256i phi = _mm256_maddubs_epi16(hi, Load256(y[t]->qs + 64 * c + 32));
            sumi[t] = _mm256_add_epi32(sumi[t], _mm256_madd_epi16(plo, slo));
            sumi[t] = _mm256_add_epi32(sumi[t], _mm256_madd_epi16(phi, shi));
          }
        }
        const __m128i mins16 = _mm_cvtepu8_epi16(_mm_srli_si128(scmn, 8));
        const float fd = H2F(dw), fdmin = H2F(dminw);
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          const __m256 d = _mm256_set1_ps(fd * y[t]->d);
          const __m256 dmin = _mm256_set1_ps(fdmin * y[t]->d);
          acc[r][t] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi[t]), acc[r][t]);
          acc[r][t] = _mm256_fnmadd_ps(dmin, _mm256_cvtepi32_ps(MinsDotBsums(mins16, y[t])), acc[r][t]);
        }
      }
    }
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) out[r * T + t] = Hsum(acc[r][t]);
  }
};

struct KQ6_K {
  static constexpr int kR = 1, kT = 4;
  template <int R, int T>
  static void Run(int64_t nb, const uint8_t* const* w, const uint8_t* const* act, float* out) {
    __m256 acc[R][T];
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; ++i) {
      const BlockQ8_K* y[T];
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) y[t] = reinterpret_cast<const BlockQ8_K*>(act[t]) + i;
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const auto* x = reinterpret_cast<const BlockQ6_K*>(w[r]) + i;
        const __m256i sc16 = _mm256_cvtepi8_epi16(Load128(x->scales));
        __m256i sumi[T];
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          const __m256i bsums = Load256(reinterpret_cast<const uint8_t*>(y[t]) + offsetof(BlockQ8_K, bsums));
          sumi[t] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(_mm256_madd_epi16(bsums, sc16), 5));
        }
#pragma GCC unroll 2
        for (int n = 0; n < 2; ++n) {
          __m256i q[4];
          UnpackQ6Half(x, n, q);
          const __m256i sc_half = _mm256_permute4x64_epi64(sc16, n ? 0xEE : 0x44);
#pragma GCC unroll 4
          for (int k = 0; k < 4; ++k) {
            const __m256i s = _mm256_shuffle_epi8(sc_half, PairShuffle(k));
#pragma GCC unroll 4
            for (int t = 0; t < T; ++t) {
              const __m256i p = _mm256_maddubs_epi16(q[k], Load256(y[t]->qs + 128 * n + 32 * k));
              sumi[t] = _mm256_add_epi32(sumi[t], _mm256_madd_epi16(p, s));
            }
          }
        }
        const float fd = H2F(x->d);
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          const __m256 d = _mm256_set1_ps(fd * y[t]->d);
          acc[r][t] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi[t]), acc[r][t]);
        }
      }
    }
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) out[r * T + t] = Hsum(acc[r][t]);
  }
};

// Float formats: one 8-lane accumulator per element, one FMA per 8 elements, Hsum, then the n % 8 tail element
// by element (vec_dot_avx2.cc's RowsFloat). nb = n (elements).
inline __m256 LoadF32(const void* p, int64_t i) { return _mm256_loadu_ps(static_cast<const float*>(p) + i); }
inline __m256 LoadF16(const void* p, int64_t i) {
  return _mm256_cvtph_ps(Load128(static_cast<const uint16_t*>(p) + i));
}
inline __m256 LoadBF16(const void* p, int64_t i) {
  const __m256i v = _mm256_cvtepu16_epi32(Load128(static_cast<const uint16_t*>(p) + i));
  return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}
inline float ScalarF32(const void* p, int64_t i) { return static_cast<const float*>(p)[i]; }
inline float ScalarF16(const void* p, int64_t i) { return gguf::Fp16ToFp32(static_cast<const uint16_t*>(p)[i]); }
inline float ScalarBF16(const void* p, int64_t i) { return gguf::Bf16ToFp32(static_cast<const uint16_t*>(p)[i]); }

template <__m256 (*Load)(const void*, int64_t), float (*Scalar)(const void*, int64_t)>
struct KFloat {
  static constexpr int kR = 4, kT = 3;
  template <int R, int T>
  static void Run(int64_t n, const uint8_t* const* w, const uint8_t* const* act, float* out) {
    __m256 acc[R][T];
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
      __m256 a[T];
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) a[t] = Load(act[t], i);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m256 wv = Load(w[r], i);
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) acc[r][t] = _mm256_fmadd_ps(wv, a[t], acc[r][t]);
      }
    }
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) {
        float sum = Hsum(acc[r][t]);
        for (int64_t k = i; k < n; ++k) sum += Scalar(w[r], k) * Scalar(act[t], k);
        out[r * T + t] = sum;
      }
  }
};

}  // namespace
}  // namespace rw::kernels::gemm_avx2
