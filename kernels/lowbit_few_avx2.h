// Internal to lowbit_avx2.cc: the decode-path kernels (1 to 3 tokens) of Q2_K, Q3_K and IQ4_XS, which decode
// each 32-element chunk in registers right before its products instead of through the block buffer of the
// batch kernels. Same integers in the same int32 lanes (chunk c: elements 32c..32c+31, the low 128-bit lane
// with scale 2c, the high one with scale 2c + 1), the same float operations per block: the bits of
// gguf::DotLowbitRef.
//
// The products differ from the batch kernels' sign trick (maddubs(|q|, sign(a, q))) only where that is
// needed: Q2_K values are unsigned (0..3), so maddubs(q, a) directly; Q3_K values are u - 4 with u unsigned
// (0..7), so maddubs(u, a) - maddubs(4, a). Both give the exact int16 pair sums, also for a = -128.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "gguf/quant_grids.h"
#include "gguf/quants.h"
#include "kernels/avx2_blocks.h"

namespace rw::kernels::lowbit_avx2 {

// The 16 six-bit Q3_K scales minus 32 as int16: scale g has its low 4 bits in byte g % 8 (nibble g / 8) and
// its high 2 bits in byte 8 + g % 4 (bits 2 (g / 4)).
inline __m256i Q3KScales(const gguf::BlockQ3_K* x) {
  uint32_t a[3];
  std::memcpy(a, x->scales, 12);
  constexpr uint32_t k2 = 0x0F0F0F0F, k1 = 0x03030303;
  const __m128i s6 = _mm_setr_epi32(static_cast<int>((a[0] & k2) | ((a[2] & k1) << 4)),
                                    static_cast<int>((a[1] & k2) | (((a[2] >> 2) & k1) << 4)),
                                    static_cast<int>(((a[0] >> 4) & k2) | (((a[2] >> 4) & k1) << 4)),
                                    static_cast<int>(((a[1] >> 4) & k2) | (((a[2] >> 6) & k1) << 4)));
  return _mm256_sub_epi16(_mm256_cvtepu8_epi16(s6), _mm256_set1_epi16(32));
}

// The 8 six-bit IQ4_XS scales minus 32 (low 4 bits: nibble ib % 2 of scales_l[ib / 2]; high 2 bits: bits 2 ib
// of scales_h), each twice (one per group of 16) as int16.
inline __m256i Iq4xsScales(const gguf::BlockIQ4_XS* x) {
  uint32_t l;
  std::memcpy(&l, x->scales_l, 4);
  const __m128i m4 = _mm_set1_epi8(0x0F);
  const __m128i lb = _mm_cvtsi32_si128(static_cast<int>(l));
  const __m128i low = _mm_unpacklo_epi8(_mm_and_si128(lb, m4), _mm_and_si128(_mm_srli_epi16(lb, 4), m4));
  const __m128i h = _mm_set1_epi32(x->scales_h), m3 = _mm_set1_epi32(3);
  const __m128i h03 = _mm_and_si128(_mm_srlv_epi32(h, _mm_setr_epi32(0, 2, 4, 6)), m3);
  const __m128i h47 = _mm_and_si128(_mm_srlv_epi32(h, _mm_setr_epi32(8, 10, 12, 14)), m3);
  const __m128i hi = _mm_packus_epi16(_mm_packus_epi32(h03, h47), _mm_setzero_si128());
  const __m128i ls = _mm_or_si128(low, _mm_slli_epi16(hi, 4));  // 8 bytes, 0..63
  return _mm256_sub_epi16(_mm256_cvtepu8_epi16(_mm_unpacklo_epi8(ls, ls)), _mm256_set1_epi16(32));
}

namespace few {

using avx2_blocks::Load256;

// Per type: the block's int16 scales (and mins), and the int16 pair sums of chunk c (= 4 n + j) with the
// activations a, given the state loaded for half n.
struct Q2K {
  using Block = gguf::BlockQ2_K;
  static constexpr bool kMins = true;
  const Block* x = nullptr;
  __m256i half = _mm256_setzero_si256();
  static __m256i Scales(const Block* b) {
    return _mm256_cvtepu8_epi16(_mm_and_si128(avx2_blocks::Load128(b->scales), _mm_set1_epi8(0x0F)));
  }
  static __m256i Mins(const Block* b) {
    const __m128i s = avx2_blocks::Load128(b->scales);
    return _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(s, 4), _mm_set1_epi8(0x0F)));
  }
  static float D(const Block* b) { return avx2_blocks::H2F(b->d); }
  static float Dmin(const Block* b) { return avx2_blocks::H2F(b->dmin); }
  void LoadHalf(int n) { half = Load256(x->qs + 32 * n); }
  __m256i Chunk(int /*n*/, int j) const {
    return _mm256_and_si256(_mm256_srli_epi16(half, 2 * j), _mm256_set1_epi8(3));
  }
  static __m256i Product(__m256i q, __m256i a) { return _mm256_maddubs_epi16(q, a); }
};

struct Q3K {
  using Block = gguf::BlockQ3_K;
  static constexpr bool kMins = false;
  const Block* x = nullptr;
  __m256i half = _mm256_setzero_si256(), hmask = _mm256_setzero_si256();
  static __m256i Scales(const Block* b) { return Q3KScales(b); }
  static __m256i Mins(const Block*) { return _mm256_setzero_si256(); }
  static float D(const Block* b) { return avx2_blocks::H2F(b->d); }
  static float Dmin(const Block*) { return 0.0f; }
  void LoadHalf(int n) {
    half = Load256(x->qs + 32 * n);
    if (n == 0) hmask = Load256(x->hmask);
  }
  // u = low 2 bits | high bit << 2 (0..7); the value is u - 4.
  __m256i Chunk(int n, int j) const {
    const __m256i low = _mm256_and_si256(_mm256_srli_epi16(half, 2 * j), _mm256_set1_epi8(3));
    const __m256i hb = _mm256_and_si256(_mm256_srli_epi16(hmask, 4 * n + j), _mm256_set1_epi8(1));
    return _mm256_or_si256(low, _mm256_slli_epi16(hb, 2));
  }
  static __m256i Product(__m256i u, __m256i a) {
    return _mm256_sub_epi16(_mm256_maddubs_epi16(u, a), _mm256_maddubs_epi16(_mm256_set1_epi8(4), a));
  }
};

struct Iq4Xs {
  using Block = gguf::BlockIQ4_XS;
  static constexpr bool kMins = false;
  const Block* x = nullptr;
  __m256i values = _mm256_setzero_si256();
  static __m256i Scales(const Block* b) { return Iq4xsScales(b); }
  static __m256i Mins(const Block*) { return _mm256_setzero_si256(); }
  static float D(const Block* b) { return avx2_blocks::H2F(b->d); }
  static float Dmin(const Block*) { return 0.0f; }
  void LoadHalf(int /*n*/) {
    values = _mm256_broadcastsi128_si256(avx2_blocks::Load128(gguf::grids::kIq4nlValues));
  }
  __m256i Chunk(int n, int j) const {
    return _mm256_shuffle_epi8(values, avx2_blocks::UnpackNibbles16(x->qs + 16 * (4 * n + j)));
  }
  static __m256i Product(__m256i q, __m256i a) {
    return _mm256_maddubs_epi16(_mm256_sign_epi8(q, q), _mm256_sign_epi8(a, q));
  }
};

// One weight row (nb blocks of Src) against T tokens (act[t]: Q8_K blocks): out[t * out_stride].
template <class Src, int T>
void Row(int64_t nb, float factor, const uint8_t* w, const uint8_t* const* act, float* out,
         int64_t out_stride) {
  using Block = typename Src::Block;
  __m256 acc[T];
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  const auto* blocks = reinterpret_cast<const Block*>(w);
  for (int64_t i = 0; i < nb; ++i) {
    _mm_prefetch(reinterpret_cast<const char*>(blocks + i + 4), _MM_HINT_T0);
    Src src;
    src.x = blocks + i;
    const __m256i sc = Src::Scales(src.x);
    const gguf::BlockQ8_K* y[T];
    __m256i sumi[T];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      y[t] = reinterpret_cast<const gguf::BlockQ8_K*>(act[t]) + i;
      sumi[t] = _mm256_setzero_si256();
    }
#pragma GCC unroll 2
    for (int n = 0; n < 2; ++n) {
      src.LoadHalf(n);
      const __m256i sc_half = _mm256_permute4x64_epi64(sc, n ? 0xEE : 0x44);
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        const __m256i q = src.Chunk(n, j);
        const __m256i s = _mm256_shuffle_epi8(sc_half, avx2_blocks::PairShuffle(j));
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          const __m256i p = Src::Product(q, Load256(y[t]->qs + 32 * (4 * n + j)));
          sumi[t] = _mm256_add_epi32(sumi[t], _mm256_madd_epi16(p, s));
        }
      }
    }
    const float dw = Src::D(src.x) * factor;
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dw * y[t]->d), _mm256_cvtepi32_ps(sumi[t]), acc[t]);
      if constexpr (Src::kMins) {
        const __m256i bsums =
            Load256(reinterpret_cast<const uint8_t*>(y[t]) + offsetof(gguf::BlockQ8_K, bsums));
        const __m256i m = _mm256_madd_epi16(bsums, Src::Mins(src.x));
        acc[t] = _mm256_fnmadd_ps(_mm256_set1_ps(Src::Dmin(src.x) * y[t]->d), _mm256_cvtepi32_ps(m), acc[t]);
      }
    }
  }
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) out[t * out_stride] = avx2_blocks::Hsum(acc[t]);
}

template <class Src>
bool Rows(int64_t nb, float factor, const uint8_t* w, const uint8_t* const* act, int n_tok, float* out,
          int64_t out_stride) {
  switch (n_tok) {
    case 1:
      Row<Src, 1>(nb, factor, w, act, out, out_stride);
      return true;
    case 2:
      Row<Src, 2>(nb, factor, w, act, out, out_stride);
      return true;
    case 3:
      Row<Src, 3>(nb, factor, w, act, out, out_stride);
      return true;
    default:
      return false;
  }
}

}  // namespace few

// The kernel above for 1 to 3 tokens of these types; false (nothing written) otherwise.
inline bool RowFew(gguf::TensorType t, int64_t nb, float factor, const uint8_t* w, const uint8_t* const* act,
                   int n_tok, float* out, int64_t out_stride) {
  switch (t) {
    case gguf::TensorType::kQ2_K:
      return few::Rows<few::Q2K>(nb, factor, w, act, n_tok, out, out_stride);
    case gguf::TensorType::kQ3_K:
      return few::Rows<few::Q3K>(nb, factor, w, act, n_tok, out, out_stride);
    case gguf::TensorType::kIQ4_XS:
      return few::Rows<few::Iq4Xs>(nb, factor, w, act, n_tok, out, out_stride);
    default:
      return false;
  }
}

}  // namespace rw::kernels::lowbit_avx2
