// Internal to lowbit_avx2.cc: the decode-path kernels (1 to 3 tokens) of IQ2_XXS and IQ3_XXS, which look the
// grid entries up in registers right before their products instead of decoding each block through the buffer
// of the batch kernels. The grids hold magnitudes (unsigned bytes), so the stored signs go onto the
// activations: maddubs(|q|, +-a) gives the exact int16 pair sums (|q| <= 62, |a| <= 127), madd with the chunk's
// scale 2 ls + 1 their int32 lanes (chunk c, lane l: elements 32 c + 4 l .. + 3, the lanes of
// gguf::DotLowbitRef), and the block's float operations are the twin's: the bits of gguf::DotLowbitRef.
// Tokens holding a -128 activation (which cannot be negated in int8) get their results from the twin instead
// (lowbit_avx2.cc's GemmRows overwrites them).
//
// AVX2: the 7 stored sign bits of each 8 elements (plus the parity bit) come from a 128-entry table of +-1
// bytes for vpsignb. AVX-512 (GemmRows' `wide`; the caller also checked BMI2): two chunks per 512-bit register,
// the 56 sign bits of a chunk pair spread into the low 7 bits of 8 bytes by one pdep, each byte's parity into
// its bit 7, and the 64-bit result is the mask of a masked negation. The grid entries are inserted one by one
// (vpgatherqq / vpgatherdd were slower on Zen 4: IQ2_XXS 2.8 vs 5.5 GB/s).
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "gguf/quant_grids.h"
#include "gguf/quants.h"
#include "kernels/avx2_blocks.h"

namespace rw::kernels::lowbit_avx2::iq_few {

inline uint32_t U32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// SignsWithParity(i) as 8 bytes of +1 / -1 (vpsignb operands).
struct SignBytes {
  uint64_t m[128];
  constexpr SignBytes() : m() {
    for (uint32_t i = 0; i < 128; ++i)
      for (int j = 0; j < 8; ++j)
        m[i] |= uint64_t{((gguf::grids::SignsWithParity(i) >> j) & 1) ? 0xFFu : 0x01u} << (8 * j);
  }
};
inline constexpr SignBytes kSignBytes;

inline int64_t S64(uint32_t seven) { return static_cast<int64_t>(kSignBytes.m[seven & 127]); }

// Per type: the magnitudes and signs of chunk ib (32 elements) and the aux word holding its sign bits (4 x 7
// from bit 0) and its 4-bit scale (bits 28-31).
struct Iq2xxs {
  using Block = gguf::BlockIQ2_XXS;
  static constexpr float kFactor = 0.125f;
  static constexpr int kScaleLane0 = 1, kScaleStride = 2;  // aux word ib: int32 lane 2 ib + 1 of qs
  static uint32_t Aux(const Block* x, int ib) { return U32(x->qs + 8 * ib + 4); }
  static __m256i Grid(const Block* x, int ib) {
    const uint8_t* idx = x->qs + 8 * ib;
    const uint64_t* g = gguf::grids::kIq2xxsGrid;
    return _mm256_set_epi64x(static_cast<int64_t>(g[idx[3]]), static_cast<int64_t>(g[idx[2]]),
                             static_cast<int64_t>(g[idx[1]]), static_cast<int64_t>(g[idx[0]]));
  }
};

struct Iq3xxs {
  using Block = gguf::BlockIQ3_XXS;
  static constexpr float kFactor = 0.25f;
  static constexpr int kScaleLane0 = 0, kScaleStride = 1;  // aux word ib: int32 lane ib of qs + 64
  static uint32_t Aux(const Block* x, int ib) { return U32(x->qs + 64 + 4 * ib); }
  static __m256i Grid(const Block* x, int ib) {
    const uint8_t* idx = x->qs + 8 * ib;
    const uint32_t* g = gguf::grids::kIq3xxsGrid;
    const auto e = [&](int k) { return static_cast<int>(g[idx[k]]); };
    return _mm256_set_epi32(e(7), e(6), e(5), e(4), e(3), e(2), e(1), e(0));
  }
};

// The loop pieces of both kernels: token t's Q8_K block i, the block's float operations (the twin's: the int32
// lanes times (d * factor) * d_act into 8 float lanes) and the final sums.
template <int T>
inline void TokenBlocks(const uint8_t* const* act, int64_t i, const gguf::BlockQ8_K** y) {
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) y[t] = reinterpret_cast<const gguf::BlockQ8_K*>(act[t]) + i;
}
template <int T>
inline void AddBlock(float dw, const gguf::BlockQ8_K* const* y, const __m256i* sumi, __m256* acc) {
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t)
    acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dw * y[t]->d), _mm256_cvtepi32_ps(sumi[t]), acc[t]);
}
template <int T>
inline void StoreSums(const __m256* acc, float* out, int64_t out_stride) {
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) out[t * out_stride] = avx2_blocks::Hsum(acc[t]);
}

// One weight row (nb blocks) against T tokens (act[t]: Q8_K blocks): out[t * out_stride].
template <class Iq, int T>
void Row(int64_t nb, const uint8_t* w, const uint8_t* const* act, float* out, int64_t out_stride) {
  __m256 acc[T] = {};
  const auto* blocks = reinterpret_cast<const typename Iq::Block*>(w);
  for (int64_t i = 0; i < nb; ++i) {
    const auto* x = blocks + i;
    _mm_prefetch(reinterpret_cast<const char*>(x + 4), _MM_HINT_T0);
    const gguf::BlockQ8_K* y[T];
    TokenBlocks<T>(act, i, y);
    __m256i sumi[T] = {};
#pragma GCC unroll 8
    for (int ib = 0; ib < 8; ++ib) {
      const uint32_t aux = Iq::Aux(x, ib);
      const __m256i q = Iq::Grid(x, ib);
      const __m256i s = _mm256_set_epi64x(S64(aux >> 21), S64(aux >> 14), S64(aux >> 7), S64(aux));
      const __m256i scale = _mm256_set1_epi16(static_cast<short>(2 * (aux >> 28) + 1));
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const __m256i a = _mm256_sign_epi8(avx2_blocks::Load256(y[t]->qs + 32 * ib), s);
        sumi[t] = _mm256_add_epi32(sumi[t], _mm256_madd_epi16(_mm256_maddubs_epi16(q, a), scale));
      }
    }
    AddBlock<T>(avx2_blocks::H2F(x->d) * Iq::kFactor, y, sumi, acc);
  }
  StoreSums<T>(acc, out, out_stride);
}

// ---- AVX-512 ---------------------------------------------------------------------------------------------

#define REWIND_IQ_FEW_WIDE __attribute__((target("avx2,fma,f16c,bmi2,avx512f,avx512dq,avx512bw,avx512vl")))
// GCC 12's AVX-512 headers start broadcasts from _mm512_undefined_*(), which -Wmaybe-uninitialized flags.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

// The 2 x 28 sign bits of a chunk pair (bits 0-27 of each aux word) -> the 64-bit mask of negative elements.
REWIND_IQ_FEW_WIDE inline __mmask64 SignMask64(uint32_t aux0, uint32_t aux1) {
  const uint64_t bits = (aux0 & 0x0FFFFFFFu) | (static_cast<uint64_t>(aux1) << 28);
  const uint64_t x = _pdep_u64(bits, 0x7F7F7F7F7F7F7F7Full);
  uint64_t p = x ^ (x >> 4);  // bit 0 of each byte: the parity of that byte's bits
  p ^= p >> 2;
  p ^= p >> 1;
  return _cvtu64_mask64(x | ((p & 0x0101010101010101ull) << 7));
}

// The 8 scales ls in int32 lanes kScaleLane0 + kScaleStride * ib (ib: chunk): the aux words, shifted.
template <class Iq>
REWIND_IQ_FEW_WIDE inline __m512i ScaleLanes(const typename Iq::Block* x) {
  if constexpr (Iq::kScaleStride == 2) return _mm512_srli_epi32(_mm512_loadu_si512(x->qs), 28);
  return _mm512_castsi256_si512(
      _mm256_srli_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x->qs + 64)), 28));
}

template <class Iq, int T>
REWIND_IQ_FEW_WIDE void RowWide(int64_t nb, const uint8_t* w, const uint8_t* const* act, float* out,
                                int64_t out_stride) {
  __m256 acc[T] = {};
  const auto* blocks = reinterpret_cast<const typename Iq::Block*>(w);
  const __m512i zero = _mm512_setzero_si512();
  for (int64_t i = 0; i < nb; ++i) {
    const auto* x = blocks + i;
    _mm_prefetch(reinterpret_cast<const char*>(x + 4), _MM_HINT_T0);
    const gguf::BlockQ8_K* y[T];
    TokenBlocks<T>(act, i, y);
    __m512i sumi[T] = {};
    // 2 ls + 1 in both int16 halves of its lane.
    __m512i sc = _mm512_or_si512(_mm512_slli_epi32(ScaleLanes<Iq>(x), 1), _mm512_set1_epi32(1));
    sc = _mm512_or_si512(sc, _mm512_slli_epi32(sc, 16));
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(Iq::Grid(x, 2 * k)), Iq::Grid(x, 2 * k + 1), 1);
      const __mmask64 neg = SignMask64(Iq::Aux(x, 2 * k), Iq::Aux(x, 2 * k + 1));
      constexpr int l0 = Iq::kScaleLane0, ls = Iq::kScaleStride;
      const int lo = l0 + ls * 2 * k, hi = l0 + ls * (2 * k + 1);
      const __m512i scale = _mm512_permutexvar_epi32(
          _mm512_setr_epi32(lo, lo, lo, lo, lo, lo, lo, lo, hi, hi, hi, hi, hi, hi, hi, hi), sc);
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const __m512i a = _mm512_loadu_si512(y[t]->qs + 64 * k);
        const __m512i sa = _mm512_mask_sub_epi8(a, neg, zero, a);
        sumi[t] = _mm512_add_epi32(sumi[t], _mm512_madd_epi16(_mm512_maddubs_epi16(q, sa), scale));
      }
    }
    __m256i s8[T];  // the two chunks' lanes folded: the twin's 8 int32 lanes (exact)
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t)
      s8[t] = _mm256_add_epi32(_mm512_castsi512_si256(sumi[t]), _mm512_extracti64x4_epi64(sumi[t], 1));
    AddBlock<T>(avx2_blocks::H2F(x->d) * Iq::kFactor, y, s8, acc);
  }
  StoreSums<T>(acc, out, out_stride);
}
#pragma GCC diagnostic pop

template <class Iq>
bool Rows(int64_t nb, const uint8_t* w, const uint8_t* const* act, int n_tok, float* out, int64_t out_stride,
          bool wide) {
  switch (n_tok) {
    case 1: wide ? RowWide<Iq, 1>(nb, w, act, out, out_stride) : Row<Iq, 1>(nb, w, act, out, out_stride); break;
    case 2: wide ? RowWide<Iq, 2>(nb, w, act, out, out_stride) : Row<Iq, 2>(nb, w, act, out, out_stride); break;
    case 3: wide ? RowWide<Iq, 3>(nb, w, act, out, out_stride) : Row<Iq, 3>(nb, w, act, out, out_stride); break;
    default: return false;
  }
  return true;
}

// The kernels above for 1 to 3 tokens of IQ2_XXS / IQ3_XXS (wide: AVX-512 BW and BMI2 checked by the caller);
// false (nothing written) otherwise.
inline bool RowFew(gguf::TensorType t, int64_t nb, const uint8_t* w, const uint8_t* const* act, int n_tok,
                   float* out, int64_t out_stride, bool wide) {
  switch (t) {
    case gguf::TensorType::kIQ2_XXS: return Rows<Iq2xxs>(nb, w, act, n_tok, out, out_stride, wide);
    case gguf::TensorType::kIQ3_XXS: return Rows<Iq3xxs>(nb, w, act, n_tok, out, out_stride, wide);
    default: return false;
  }
}

}  // namespace rw::kernels::lowbit_avx2::iq_few
