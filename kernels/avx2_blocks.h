// Helpers shared by the AVX2 dot products (vec_dot_avx2.cc) and the tile kernels (gemm_tiles_*.h): loads, the
// fixed-order horizontal sum, and the unpacking of K-quant scales and Q6_K values. Only for files compiled with
// -mavx2 -mfma -mf16c (both are), called after a CPU check.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "gguf/quants.h"

namespace rw::kernels::avx2_blocks {

// Horizontal sum in one fixed order: (lo128 + hi128), then (0+2, 1+3), then (0 + 1).
inline float Hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float H2F(uint16_t h) { return _cvtsh_ss(h); }
inline __m256i Load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline __m128i Load128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }
// Pairs of int16 summed into int32 lanes (exact).
inline __m256i SumPairs16(__m256i v) { return _mm256_madd_epi16(v, _mm256_set1_epi16(1)); }
// u (unsigned bytes) · s (signed bytes) summed per 4 bytes into int32 lanes (exact for |u|,|s| <= 127).
inline __m256i DotUnsigned(__m256i u, __m256i s) { return SumPairs16(_mm256_maddubs_epi16(u, s)); }

// 16 packed bytes of nibbles -> 32 bytes: low nibbles first (elements 0..15), then high nibbles.
inline __m256i UnpackNibbles16(const uint8_t* p) {
  const __m128i b = Load128(p);
  const __m128i m = _mm_set1_epi8(0x0F);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(b, 4), m), _mm_and_si128(b, m));
}

// Bit i of x -> byte i = 0xFF when set, 0 otherwise.
inline __m256i BytesFromBits32(const uint8_t* p) {
  uint32_t x;
  std::memcpy(&x, p, 4);
  const __m256i shuf = _mm256_setr_epi64x(0x0000000000000000, 0x0101010101010101, 0x0202020202020202,
                                          0x0303030303030303);
  __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(x)), shuf);
  bytes = _mm256_or_si256(bytes, _mm256_set1_epi64x(0x7FBFDFEFF7FBFDFE));
  return _mm256_cmpeq_epi8(bytes, _mm256_set1_epi64x(-1));
}

// The 12 packed bytes of Q4_K / Q5_K scales and mins -> utmp[0..1] = 8 scales, utmp[2..3] = 8 mins (6 bits).
inline void UnpackScalesMins(const uint8_t* packed, uint32_t utmp[4]) {
  constexpr uint32_t kMask1 = 0x3F3F3F3F, kMask2 = 0x0F0F0F0F, kMask3 = 0x03030303;
  std::memcpy(utmp, packed, 12);
  utmp[3] = ((utmp[2] >> 4) & kMask2) | (((utmp[1] >> 6) & kMask3) << 4);
  const uint32_t uaux = utmp[1] & kMask1;
  utmp[1] = (utmp[2] & kMask2) | (((utmp[0] >> 6) & kMask3) << 4);
  utmp[2] = uaux;
  utmp[0] &= kMask1;
}

// Broadcasts the int16 scale j (of 16 per 128-bit lane) for _mm256_shuffle_epi8.
inline __m256i ScaleShuffle(int j) {
  return _mm256_set1_epi16(static_cast<short>((2 * j) | ((2 * j + 1) << 8)));
}

// Σ mins_g · bsums_g of a Q8_K block, per int32 lane.
inline __m256i MinsDotBsums(__m128i mins16, const gguf::BlockQ8_K* y) {
  const __m256i m2 = _mm256_set_m128i(_mm_unpackhi_epi16(mins16, mins16), _mm_unpacklo_epi16(mins16, mins16));
  return _mm256_madd_epi16(Load256(reinterpret_cast<const uint8_t*>(y) + offsetof(gguf::BlockQ8_K, bsums)), m2);
}

// Puts scale 4k (4k+1) in the low lane and 4k+2 (4k+3) in the high lane of each int16 pair.
inline __m256i PairShuffle(int k) {
  const short lo = static_cast<short>((4 * k) | ((4 * k + 1) << 8));
  const short hi = static_cast<short>((4 * k + 2) | ((4 * k + 3) << 8));
  return _mm256_set_m128i(_mm_set1_epi16(hi), _mm_set1_epi16(lo));
}

// Half n (0 or 1) of a Q6_K block: its 128 six-bit values, unsigned (0..63), as q[k] = elements 32k..32k+31.
inline void UnpackQ6Half(const gguf::BlockQ6_K* x, int n, __m256i q[4]) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x03);
  const __m256i l0 = Load256(x->ql + 64 * n);
  const __m256i l1 = Load256(x->ql + 64 * n + 32);
  const __m256i h = Load256(x->qh + 32 * n);
  q[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_slli_epi16(_mm256_and_si256(h, m2), 4));
  q[1] = _mm256_or_si256(_mm256_and_si256(l1, m4),
                         _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2), m2), 4));
  q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                         _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 4), m2), 4));
  q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                         _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 6), m2), 4));
}

// True if some activation value of the nb Q8_0 blocks at `act` is -128. The quantiser writes -128 only for
// blocks whose largest |x| is below ~4e-37 (127 / amax overflows); the VNNI kernels compute those products
// exactly while the AVX2 sign trick does not, so such calls keep the AVX2 kernels (same bits everywhere).
// One pass over the activations, far cheaper than the product.
inline bool HasMinus128(const void* act, int64_t nb) {
  const auto* y = static_cast<const gguf::BlockQ8_0*>(act);
  const __m256i m = _mm256_set1_epi8(static_cast<char>(0x80));
  __m256i any = _mm256_setzero_si256();
  for (int64_t i = 0; i < nb; ++i) any = _mm256_or_si256(any, _mm256_cmpeq_epi8(Load256(y[i].qs), m));
  return !_mm256_testz_si256(any, any);
}

// GCC 12's AVX-512 headers start broadcasts from _mm512_undefined_*(), which -Wmaybe-uninitialized flags.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
// [a | b] as one 512-bit register (for kernels compiled with AVX-512 target attributes only).
__attribute__((target("avx2,avx512f,avx512dq"), always_inline)) inline __m512i PairI(__m256i a, __m256i b) {
  return _mm512_inserti64x4(_mm512_broadcast_i64x4(a), b, 1);
}
__attribute__((target("avx2,avx512f,avx512dq"), always_inline)) inline __m512 PairF(float a, float b) {
  return _mm512_insertf32x8(_mm512_set1_ps(a), _mm256_set1_ps(b), 1);
}
// UnpackQ6Half on 512-bit registers: l0, l1 and h hold the ql, ql + 32 and qh bytes of two halves (of one
// block or two rows), one per 256 bits; q[k] = their elements 32k..32k+31, unsigned (0..63).
__attribute__((target("avx2,avx512f,avx512bw"), always_inline)) inline void UnpackQ6Zmm(__m512i l0, __m512i l1,
                                                                                       __m512i h, __m512i q[4]) {
  const __m512i m4 = _mm512_set1_epi8(0x0F), m2 = _mm512_set1_epi8(0x03);
  q[0] = _mm512_or_si512(_mm512_and_si512(l0, m4), _mm512_slli_epi16(_mm512_and_si512(h, m2), 4));
  q[1] = _mm512_or_si512(_mm512_and_si512(l1, m4), _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(h, 2), m2), 4));
  q[2] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l0, 4), m4),
                         _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(h, 4), m2), 4));
  q[3] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l1, 4), m4),
                         _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(h, 6), m2), 4));
}
// sumi += scale_lo * (4-product sums of w_lo . a_lo) + scale_hi * (4-product sums of w_hi . a_hi), per int32
// lane: vpdpbusd makes each lane's sum of the 4 products of bytes 4j..4j+3 (the lane layout of maddubs + madd),
// the two sums are packed as the low and high int16 of the lane (each must fit int16), and one vpdpwssd
// multiplies them by the int16 pair in `scales` (low: scale_lo, high: scale_hi) and adds both: exact int32.
__attribute__((target("avx512f,avx512bw,avx512vnni"), always_inline)) inline __m512i PackedPairDot(
    __m512i sumi, __m512i w_lo, __m512i a_lo, __m512i w_hi, __m512i a_hi, __m512i scales) {
  const __m512i zero = _mm512_setzero_si512();
  const __m512i lo = _mm512_dpbusd_epi32(zero, w_lo, a_lo);
  const __m512i hi = _mm512_dpbusd_epi32(zero, w_hi, a_hi);
  return _mm512_dpwssd_epi32(sumi, _mm512_mask_mov_epi16(lo, 0xAAAAAAAA, _mm512_slli_epi32(hi, 16)), scales);
}
#pragma GCC diagnostic pop

}  // namespace rw::kernels::avx2_blocks
