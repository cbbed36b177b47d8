// Internal to kernels/gemm_avx2.cc (included only there): variants of the tile kernels of gemm_tiles_avx2.h
// for CPUs with AVX-512 (F, DQ, BW, VL, VNNI), each function compiled for those with a target attribute and
// called only after the CPU check in gemm_avx2.cc. Mostly two tokens per 512-bit register; every element
// still gets the float operations of its 256-bit kernel lane by lane (see each variant).
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "gguf/quants.h"
#include "kernels/gemm_tiles_avx2.h"

namespace rw::kernels::gemm_avx2 {
namespace {

using gguf::BlockQ4_K;
using gguf::BlockQ5_K;
using gguf::BlockQ6_K;
using gguf::BlockQ8_0;
using gguf::BlockQ8_K;
using gguf::TensorType;

// Q8_0 with AVX512-VNNI (vpdpbusd on ymm registers; KQ8_0Zmm below uses it for odd token counts). vpdpbusd
// multiplies unsigned by signed bytes and adds each group of 4 products straight into int32 lane j (bytes
// 4j..4j+3): the lane layout of maddubs + madd(1) in KQ8_0. The activation
// is made unsigned as a + 128 and the excess 128 * (sum of the 4 weights) is removed by starting the lane at
// -128 * sum(w), so each lane holds exactly sum a*w. KQ8_0's lane is the same number: |w| * sign(a, w) pairs
// never saturate int16, and sign() is exact for a != -128 (GemmRows gives activations containing -128, which
// the quantiser writes only for blocks of magnitude < ~4e-37, to KQ8_0 instead). The float part is the same:
// d = dw * da (lane by lane the same IEEE product), one FMA of the converted lane sums per block, the same Hsum.
struct KQ8_0Vnni {
  static constexpr int kR = 4, kT = 4;
  template <int R, int T>
  __attribute__((target("avx2,fma,f16c,avx512vl,avx512vnni"))) static void Run(
      int64_t nb, const uint8_t* const* w, const uint8_t* const* act, float* out) {
    const __m256i bias = _mm256_set1_epi8(static_cast<char>(0x80));
    __m256 acc[R][T];
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; ++i) {
      __m256 da[T];
      __m256i au[T];
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const auto* y = reinterpret_cast<const BlockQ8_0*>(act[t]) + i;
        da[t] = _mm256_set1_ps(H2F(y->d));
        au[t] = _mm256_xor_si256(Load256(y->qs), bias);  // a + 128 as unsigned bytes
      }
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const auto* x = reinterpret_cast<const BlockQ8_0*>(w[r]) + i;
        const __m256i xw = Load256(x->qs);
        const __m256i nbias =
            _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_dpbusd_epi32(_mm256_setzero_si256(), bias, xw));
        const __m256 dw = _mm256_set1_ps(H2F(x->d));
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          const __m256 d = _mm256_mul_ps(dw, da[t]);  // lane by lane the scalar dw * da
          const __m256i s = _mm256_dpbusd_epi32(nbias, au[t], xw);
          acc[r][t] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(s), acc[r][t]);
        }
      }
    }
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) out[r * T + t] = Hsum(acc[r][t]);
  }
};

// KQ8_0Vnni with two tokens per 512-bit register: lanes 0-7 hold token t's 8 accumulator lanes, lanes 8-15
// token t+1's. vpdpbusd, the int -> float conversion, the scale product and the FMA are lane-wise, so every
// element gets exactly KQ8_0Vnni's (and KQ8_0's) operations; the final Hsum runs on each 256-bit half. Odd
// token counts (tile remainders) use KQ8_0Vnni.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
struct KQ8_0Zmm {
  static constexpr int kR = 4, kT = 8;
  template <int R, int T>
  __attribute__((target("avx2,fma,f16c,avx512f,avx512dq,avx512vl,avx512vnni"))) static void Run(
      int64_t nb, const uint8_t* const* w, const uint8_t* const* act, float* out) {
    if constexpr (T % 2 != 0) {
      KQ8_0Vnni::Run<R, T>(nb, w, act, out);
    } else {
      constexpr int P = T / 2;  // token pairs
      const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
      __m512 acc[R][P];
      for (int r = 0; r < R; ++r)
        for (int p = 0; p < P; ++p) acc[r][p] = _mm512_setzero_ps();
      for (int64_t i = 0; i < nb; ++i) {
        __m512 da[P];
        __m512i au[P];
#pragma GCC unroll 8
        for (int p = 0; p < P; ++p) {
          const auto* y0 = reinterpret_cast<const BlockQ8_0*>(act[2 * p]) + i;
          const auto* y1 = reinterpret_cast<const BlockQ8_0*>(act[2 * p + 1]) + i;
          da[p] = PairF(H2F(y0->d), H2F(y1->d));
          au[p] = _mm512_xor_si512(PairI(Load256(y0->qs), Load256(y1->qs)), bias);
        }
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const auto* x = reinterpret_cast<const BlockQ8_0*>(w[r]) + i;
          const __m512i xw = _mm512_broadcast_i64x4(Load256(x->qs));
          const __m512i nbias =
              _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), bias, xw));
          const __m512 dw = _mm512_set1_ps(H2F(x->d));
#pragma GCC unroll 8
          for (int p = 0; p < P; ++p) {
            const __m512 d = _mm512_mul_ps(dw, da[p]);
            const __m512i s = _mm512_dpbusd_epi32(nbias, au[p], xw);
            acc[r][p] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(s), acc[r][p]);
          }
        }
      }
      for (int r = 0; r < R; ++r)
        for (int p = 0; p < P; ++p) {
          out[r * T + 2 * p] = Hsum(_mm512_castps512_ps256(acc[r][p]));
          out[r * T + 2 * p + 1] = Hsum(_mm512_extractf32x8_ps(acc[r][p], 1));
        }
    }
  }
};
#pragma GCC diagnostic pop


// Shared by the row-pair kernels below (two weight rows per 512-bit register: lanes 0-7 row A, 8-15 row B).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
// out[t] = row A's sum for token t, out[T + t] = row B's: Hsum of each half.
template <int T>
__attribute__((target("avx2,avx512f,avx512dq"), always_inline)) inline void StoreRowPair(const __m512* acc,
                                                                                           float* out) {
  for (int t = 0; t < T; ++t) {
    out[t] = Hsum(_mm512_castps512_ps256(acc[t]));
    out[T + t] = Hsum(_mm512_extractf32x8_ps(acc[t], 1));
  }
}
#pragma GCC diagnostic pop

// Q8_0 for a few tokens (2-4: a speculative verify batch), shaped like the decode kernel RowsQ8_0Zmm
// (kernels/vec_dot_avx2.cc): two weight rows per 512-bit register (lanes 0-7 row r, 8-15 row r+1), the weights
// made unsigned (w + 128) and the excess 128 * (sum of each 4 activations) removed by starting the lane at
// -128 * sum(a). That start value and the activation scale depend only on the token and block, so
// PrepareQ8_0Tokens computes them once per call for every row group. Each lane holds exactly sum w*a (the lane
// layout of KQ8_0), d = dw * da is lane by lane the scalar product, then one FMA per block and the same Hsum
// per half: the bits of KQ8_0 and of the decode kernels. Activations containing -128 never come here.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
struct alignas(64) Lanes16 {
  int32_t v[16];
};
struct Q8_0Tokens {
  const uint8_t* act[8];  // token rows (BlockQ8_0)
  const Lanes16* start;   // [T][nb]: -128 * (sum of each group of 4 activations), both halves
  const float* da;        // [T][nb]: activation scales
};

template <int T>
__attribute__((target("avx2,fma,f16c,avx512f,avx512dq,avx512bw,avx512vl,avx512vnni"))) void PrepareQ8_0Tokens(
    int64_t nb, const uint8_t* act, size_t a_stride, Lanes16* start, float* da) {
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
  for (int t = 0; t < T; ++t) {
    const auto* y = reinterpret_cast<const BlockQ8_0*>(act + t * a_stride);
    for (int64_t i = 0; i < nb; ++i) {
      const __m512i qa = _mm512_broadcast_i64x4(Load256(y[i].qs));
      _mm512_store_si512(start + t * nb + i, _mm512_sub_epi32(_mm512_setzero_si512(),
                                                              _mm512_dpbusd_epi32(_mm512_setzero_si512(), bias, qa)));
      da[t * nb + i] = H2F(y[i].d);
    }
  }
}

// 2P rows x T tokens; out[row * T + t]. Prefetches `ahead` bytes past each weight block.
template <int P, int T>
__attribute__((target("avx2,fma,f16c,avx512f,avx512dq,avx512bw,avx512vl,avx512vnni"))) void RowPairsQ8_0(
    int64_t nb, const uint8_t* const* w, ptrdiff_t ahead, const Q8_0Tokens& tok, float* out) {
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
  const __m512i halves = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
  __m512 acc[P][T];
  for (int p = 0; p < P; ++p)
    for (int t = 0; t < T; ++t) acc[p][t] = _mm512_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    __m512i qa[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t)
      qa[t] = _mm512_broadcast_i64x4(Load256(reinterpret_cast<const BlockQ8_0*>(tok.act[t])[i].qs));
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) {
      const auto* x0 = reinterpret_cast<const BlockQ8_0*>(w[2 * p]) + i;
      const auto* x1 = reinterpret_cast<const BlockQ8_0*>(w[2 * p + 1]) + i;
      // The same block of the next row group (short rows are too short for the hardware prefetcher).
      _mm_prefetch(reinterpret_cast<const char*>(x0) + ahead, _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(x1) + ahead, _MM_HINT_T0);
      const __m512i xu = _mm512_xor_si512(PairI(Load256(x0->qs), Load256(x1->qs)), bias);
      // [dw0 x 8 | dw1 x 8]: both scales converted at once, then spread over the halves.
      const __m128i h = _mm_insert_epi16(_mm_cvtsi32_si128(x0->d), x1->d, 1);
      const __m512 dw = _mm512_permutexvar_ps(halves, _mm512_castps128_ps512(_mm_cvtph_ps(h)));
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const __m512 d = _mm512_mul_ps(dw, _mm512_set1_ps(tok.da[t * nb + i]));  // lane-wise dw * da
        const __m512i s = _mm512_dpbusd_epi32(_mm512_load_si512(tok.start + t * nb + i), xu, qa[t]);
        acc[p][t] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(s), acc[p][t]);
      }
    }
  }
  for (int p = 0; p < P; ++p) StoreRowPair<T>(acc[p], out + 2 * p * T);
}
#pragma GCC diagnostic pop

// Q4_K / Q5_K with 2-8 tokens on AVX-512 VNNI: two weight rows per 512-bit register (lanes 0-7: row A, 8-15: row B),
// each token's activations in both halves, the rows' decoding (nibbles, scales) shared by the tokens. KQx_K's
// lane j of a 32-byte chunk is scale * (sum of the 4 products of bytes 4j..4j+3) from maddubs + madd; here
// vpdpbusd makes the same 4-product sums for the low and the high nibbles (|sum| <= 4 * 15 * 128 fits int16),
// they are packed as the two int16 halves of each lane, and one vpdpwssd multiplies each by its sub-block's
// scale and adds both: the same exact int32. The float steps are lane-wise KQx_K's (d and dmin the same scalar
// products, one FMA and one FNMA per block), then Hsum per half.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
// Shuffle control: int16 scale j into the low half and scale j + 1 into the high half of every int32 lane.
__attribute__((target("avx512f"), always_inline)) inline __m512i ScalePair(int j) {
  return _mm512_set1_epi32((2 * j) | ((2 * j + 1) << 8) | ((2 * j + 2) << 16) | ((2 * j + 3) << 24));
}

template <bool kFive, int T>
__attribute__((target("avx2,fma,f16c,avx512f,avx512dq,avx512bw,avx512vl,avx512vnni"))) void RowPairQx_K(
    int64_t nb, const uint8_t* wa, const uint8_t* wb, ptrdiff_t ahead, const uint8_t* const* act, float* out) {
  using Block = std::conditional_t<kFive, BlockQ5_K, BlockQ4_K>;
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  const __m512i one = _mm512_set1_epi8(1);
  const __m512i zero = _mm512_setzero_si512();
  __m512 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const auto* xa = reinterpret_cast<const Block*>(wa) + i;
    const auto* xb = reinterpret_cast<const Block*>(wb) + i;
    for (int l = 0; l < static_cast<int>(sizeof(Block)); l += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(xa) + ahead + l, _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(xb) + ahead + l, _MM_HINT_T0);
    }
    uint32_t ua[4], ub[4];
    UnpackScalesMins(xa->scales, ua);
    UnpackScalesMins(xb->scales, ub);
    const __m128i scmn_a = _mm_set_epi32(static_cast<int>(ua[3]), static_cast<int>(ua[2]), static_cast<int>(ua[1]),
                                         static_cast<int>(ua[0]));
    const __m128i scmn_b = _mm_set_epi32(static_cast<int>(ub[3]), static_cast<int>(ub[2]), static_cast<int>(ub[1]),
                                         static_cast<int>(ub[0]));
    const __m512i sc16 = PairI(_mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(scmn_a)),
                               _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(scmn_b)));
    const BlockQ8_K* y[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) y[t] = reinterpret_cast<const BlockQ8_K*>(act[t]) + i;
    __m512i sumi[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) sumi[t] = zero;
    __m512i hbits = zero;
    if constexpr (kFive) hbits = PairI(Load256(xa->qh), Load256(xb->qh));
#pragma GCC unroll 8
    for (int c = 0; c < 4; ++c) {
      const __m512i q = PairI(Load256(xa->qs + 32 * c), Load256(xb->qs + 32 * c));
      __m512i lo = _mm512_and_si512(q, m4);
      __m512i hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
      if constexpr (kFive) {  // the fifth bit (values up to 31: the 4-product sums still fit int16)
        lo = _mm512_or_si512(lo, _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(hbits, 2 * c), one), 4));
        hi = _mm512_or_si512(hi, _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(hbits, 2 * c + 1), one), 4));
      }
      const __m512i s2 = _mm512_shuffle_epi8(sc16, ScalePair(2 * c));
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        sumi[t] = PackedPairDot(sumi[t], lo, _mm512_broadcast_i64x4(Load256(y[t]->qs + 64 * c)), hi,
                                _mm512_broadcast_i64x4(Load256(y[t]->qs + 64 * c + 32)), s2);
      }
    }
    // MinsDotBsums for both rows: [mins of A | mins of B] against the token's bsums in both halves.
    const __m128i mins_a = _mm_cvtepu8_epi16(_mm_srli_si128(scmn_a, 8));
    const __m128i mins_b = _mm_cvtepu8_epi16(_mm_srli_si128(scmn_b, 8));
    const __m512i m2 = PairI(_mm256_set_m128i(_mm_unpackhi_epi16(mins_a, mins_a), _mm_unpacklo_epi16(mins_a, mins_a)),
                             _mm256_set_m128i(_mm_unpackhi_epi16(mins_b, mins_b), _mm_unpacklo_epi16(mins_b, mins_b)));
    const float fda = H2F(xa->d), fdb = H2F(xb->d), fma_ = H2F(xa->dmin), fmb = H2F(xb->dmin);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m512 d = PairF(fda * y[t]->d, fdb * y[t]->d);
      const __m512 dmin = PairF(fma_ * y[t]->d, fmb * y[t]->d);
      const __m512i bs = _mm512_broadcast_i64x4(
          Load256(reinterpret_cast<const uint8_t*>(y[t]) + offsetof(gguf::BlockQ8_K, bsums)));
      acc[t] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(sumi[t]), acc[t]);
      acc[t] = _mm512_fnmadd_ps(dmin, _mm512_cvtepi32_ps(_mm512_madd_epi16(bs, m2)), acc[t]);
    }
  }
  StoreRowPair<T>(acc, out);
}
#pragma GCC diagnostic pop

// Q6_K with 3-8 tokens on AVX-512 VNNI, shaped like RowPairQx_K: two weight rows per 512-bit register, each
// token's activations in both halves. KQ6_K's lane j of a 32-value group is its 16-value sub-block's scale *
// (sum of the 4 products of bytes 4j..4j+3), unsigned 6-bit values, after a start of -32 * scale * bsums; here
// vpdpbusd makes those 4-product sums (|sum| <= 4 * 63 * 128 fits int16) for two groups, packed as the int16
// halves of each lane, and one vpdpwssd applies both scales (signed) and adds: the same exact int32. The float
// part is KQ6_K's lane-wise (d the same scalar product, one FMA per block), then Hsum per half.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
// Shuffle control for the scales of groups k and k + 1 of a half block: in the first 128-bit lane of each row,
// int16 scales 2k (low) and 2k + 2 (high) of every int32 lane; in the second, 2k + 1 and 2k + 3.
__attribute__((target("avx2,avx512f,avx512dq"), always_inline)) inline __m512i Q6ScalePair(int k) {
  const int lo = (4 * k) | ((4 * k + 1) << 8) | ((4 * k + 4) << 16) | ((4 * k + 5) << 24);
  const int hi = (4 * k + 2) | ((4 * k + 3) << 8) | ((4 * k + 6) << 16) | ((4 * k + 7) << 24);
  return _mm512_broadcast_i64x4(_mm256_set_m128i(_mm_set1_epi32(hi), _mm_set1_epi32(lo)));
}

template <int T>
__attribute__((target("avx2,fma,f16c,avx512f,avx512dq,avx512bw,avx512vl,avx512vnni"))) void RowPairQ6_K(
    int64_t nb, const uint8_t* wa, const uint8_t* wb, ptrdiff_t ahead, const uint8_t* const* act, float* out) {
  const __m512i zero = _mm512_setzero_si512();
  __m512 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const auto* xa = reinterpret_cast<const BlockQ6_K*>(wa) + i;
    const auto* xb = reinterpret_cast<const BlockQ6_K*>(wb) + i;
    for (int l = 0; l < static_cast<int>(sizeof(BlockQ6_K)); l += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(xa) + ahead + l, _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(xb) + ahead + l, _MM_HINT_T0);
    }
    const __m256i sca = _mm256_cvtepi8_epi16(Load128(xa->scales)), scb = _mm256_cvtepi8_epi16(Load128(xb->scales));
    const BlockQ8_K* y[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) y[t] = reinterpret_cast<const BlockQ8_K*>(act[t]) + i;
    __m512i sumi[T];
    const __m512i sc16 = PairI(sca, scb);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m512i bsums =
          _mm512_broadcast_i64x4(Load256(reinterpret_cast<const uint8_t*>(y[t]) + offsetof(BlockQ8_K, bsums)));
      sumi[t] = _mm512_sub_epi32(zero, _mm512_slli_epi32(_mm512_madd_epi16(bsums, sc16), 5));
    }
#pragma GCC unroll 2
    for (int n = 0; n < 2; ++n) {
      // UnpackQ6Half on both rows at once (unpacking each row and then pairing measured 15-30% slower).
      const __m512i l0 = PairI(Load256(xa->ql + 64 * n), Load256(xb->ql + 64 * n));
      const __m512i l1 = PairI(Load256(xa->ql + 64 * n + 32), Load256(xb->ql + 64 * n + 32));
      const __m512i h = PairI(Load256(xa->qh + 32 * n), Load256(xb->qh + 32 * n));
      __m512i q[4];
      UnpackQ6Zmm(l0, l1, h, q);
      const __m512i sc_half = PairI(_mm256_permute4x64_epi64(sca, n ? 0xEE : 0x44),
                                    _mm256_permute4x64_epi64(scb, n ? 0xEE : 0x44));
#pragma GCC unroll 2
      for (int k = 0; k < 4; k += 2) {
        const __m512i s2 = _mm512_shuffle_epi8(sc_half, Q6ScalePair(k));
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
          sumi[t] = PackedPairDot(sumi[t], q[k], _mm512_broadcast_i64x4(Load256(y[t]->qs + 128 * n + 32 * k)),
                                  q[k + 1], _mm512_broadcast_i64x4(Load256(y[t]->qs + 128 * n + 32 * k + 32)), s2);
        }
      }
    }
    const float fda = H2F(xa->d), fdb = H2F(xb->d);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t)
      acc[t] = _mm512_fmadd_ps(PairF(fda * y[t]->d, fdb * y[t]->d), _mm512_cvtepi32_ps(sumi[t]), acc[t]);
  }
  StoreRowPair<T>(acc, out);
}
#pragma GCC diagnostic pop

// Q4_K / Q5_K with two tokens per 512-bit register (lanes 0-7: token t, 8-15: token t+1) and the decoded
// weights in both halves: the integer steps are lane-wise (exact), the float steps (scale products, conversions,
// FMA, FNMA) are lane-wise the same operations as KQx_K's, the Hsum runs on each half. Odd token counts use
// KQx_K.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
template <bool kFive>
struct KQx_KZmm {
  static constexpr int kR = 2, kT = 8;
  template <int R, int T>
  __attribute__((target("avx2,fma,f16c,avx512f,avx512dq,avx512vl,avx512bw"))) static void Run(
      int64_t nb, const uint8_t* const* w, const uint8_t* const* act, float* out) {
    if constexpr (T % 2 != 0) {
      KQx_K<kFive>::template Run<R, T>(nb, w, act, out);
    } else {
      constexpr int P = T / 2;
      const __m256i m4 = _mm256_set1_epi8(0x0F);
      const __m256i one = _mm256_set1_epi8(1);
      __m512 acc[R][P];
      for (int r = 0; r < R; ++r)
        for (int p = 0; p < P; ++p) acc[r][p] = _mm512_setzero_ps();
      for (int64_t i = 0; i < nb; ++i) {
        const BlockQ8_K* y[T];
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) y[t] = reinterpret_cast<const BlockQ8_K*>(act[t]) + i;
#pragma GCC unroll 8
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
          __m512i sumi[P];
#pragma GCC unroll 8
          for (int p = 0; p < P; ++p) sumi[p] = _mm512_setzero_si512();
#pragma GCC unroll 4
          for (int c = 0; c < 4; ++c) {
            const __m256i q = Load256(qs + 32 * c);
            __m256i lo = _mm256_and_si256(q, m4);
            __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            if constexpr (kFive) {
              lo = _mm256_or_si256(lo,
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hbits, 2 * c), one), 4));
              hi = _mm256_or_si256(
                  hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hbits, 2 * c + 1), one), 4));
            }
            const __m512i lo2 = _mm512_broadcast_i64x4(lo), hi2 = _mm512_broadcast_i64x4(hi);
            const __m512i slo = _mm512_broadcast_i64x4(_mm256_shuffle_epi8(sc16, ScaleShuffle(2 * c)));
            const __m512i shi = _mm512_broadcast_i64x4(_mm256_shuffle_epi8(sc16, ScaleShuffle(2 * c + 1)));
#pragma GCC unroll 8
            for (int p = 0; p < P; ++p) {
              const BlockQ8_K* y0 = y[2 * p];
              const BlockQ8_K* y1 = y[2 * p + 1];
              const __m512i alo = PairI(Load256(y0->qs + 64 * c), Load256(y1->qs + 64 * c));
              const __m512i ahi = PairI(Load256(y0->qs + 64 * c + 32), Load256(y1->qs + 64 * c + 32));
              sumi[p] = _mm512_add_epi32(sumi[p], _mm512_madd_epi16(_mm512_maddubs_epi16(lo2, alo), slo));
              sumi[p] = _mm512_add_epi32(sumi[p], _mm512_madd_epi16(_mm512_maddubs_epi16(hi2, ahi), shi));
            }
          }
          const __m128i mins16 = _mm_cvtepu8_epi16(_mm_srli_si128(scmn, 8));
          const float fd = H2F(dw), fdmin = H2F(dminw);
#pragma GCC unroll 8
          for (int p = 0; p < P; ++p) {
            const BlockQ8_K* y0 = y[2 * p];
            const BlockQ8_K* y1 = y[2 * p + 1];
            const __m512 d = PairF(fd * y0->d, fd * y1->d);
            const __m512 dmin = PairF(fdmin * y0->d, fdmin * y1->d);
            const __m512i mins = PairI(MinsDotBsums(mins16, y0), MinsDotBsums(mins16, y1));
            acc[r][p] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(sumi[p]), acc[r][p]);
            acc[r][p] = _mm512_fnmadd_ps(dmin, _mm512_cvtepi32_ps(mins), acc[r][p]);
          }
        }
      }
      for (int r = 0; r < R; ++r)
        for (int p = 0; p < P; ++p) {
          out[r * T + 2 * p] = Hsum(_mm512_castps512_ps256(acc[r][p]));
          out[r * T + 2 * p + 1] = Hsum(_mm512_extractf32x8_ps(acc[r][p], 1));
        }
    }
  }
};
#pragma GCC diagnostic pop

// Q6_K the same way (KQ6_K's operations lane by lane, two tokens per 512-bit register).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
struct KQ6_KZmm {
  static constexpr int kR = 2, kT = 8;
  template <int R, int T>
  __attribute__((target("avx2,fma,f16c,avx512f,avx512dq,avx512vl,avx512bw"))) static void Run(
      int64_t nb, const uint8_t* const* w, const uint8_t* const* act, float* out) {
    if constexpr (T % 2 != 0) {
      KQ6_K::Run<R, T>(nb, w, act, out);
    } else {
      constexpr int P = T / 2;
      __m512 acc[R][P];
      for (int r = 0; r < R; ++r)
        for (int p = 0; p < P; ++p) acc[r][p] = _mm512_setzero_ps();
      for (int64_t i = 0; i < nb; ++i) {
        const BlockQ8_K* y[T];
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) y[t] = reinterpret_cast<const BlockQ8_K*>(act[t]) + i;
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const auto* x = reinterpret_cast<const BlockQ6_K*>(w[r]) + i;
          const __m256i sc16 = _mm256_cvtepi8_epi16(Load128(x->scales));
          __m512i sumi[P];
#pragma GCC unroll 8
          for (int p = 0; p < P; ++p) {
            __m256i init[2];
            for (int h = 0; h < 2; ++h) {
              const __m256i bsums =
                  Load256(reinterpret_cast<const uint8_t*>(y[2 * p + h]) + offsetof(BlockQ8_K, bsums));
              init[h] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(_mm256_madd_epi16(bsums, sc16), 5));
            }
            sumi[p] = PairI(init[0], init[1]);
          }
#pragma GCC unroll 2
          for (int n = 0; n < 2; ++n) {
            __m256i q[4];
            UnpackQ6Half(x, n, q);
            const __m256i sc_half = _mm256_permute4x64_epi64(sc16, n ? 0xEE : 0x44);
#pragma GCC unroll 4
            for (int k = 0; k < 4; ++k) {
              const __m512i s2 = _mm512_broadcast_i64x4(_mm256_shuffle_epi8(sc_half, PairShuffle(k)));
              const __m512i q2 = _mm512_broadcast_i64x4(q[k]);
#pragma GCC unroll 8
              for (int p = 0; p < P; ++p) {
                const __m512i a = PairI(Load256(y[2 * p]->qs + 128 * n + 32 * k),
                                        Load256(y[2 * p + 1]->qs + 128 * n + 32 * k));
                sumi[p] = _mm512_add_epi32(sumi[p], _mm512_madd_epi16(_mm512_maddubs_epi16(q2, a), s2));
              }
            }
          }
          const float fd = H2F(x->d);
#pragma GCC unroll 8
          for (int p = 0; p < P; ++p) {
            const __m512 d = PairF(fd * y[2 * p]->d, fd * y[2 * p + 1]->d);
            acc[r][p] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(sumi[p]), acc[r][p]);
          }
        }
      }
      for (int r = 0; r < R; ++r)
        for (int p = 0; p < P; ++p) {
          out[r * T + 2 * p] = Hsum(_mm512_castps512_ps256(acc[r][p]));
          out[r * T + 2 * p + 1] = Hsum(_mm512_extractf32x8_ps(acc[r][p], 1));
        }
    }
  }
};
#pragma GCC diagnostic pop

// F16 weights against activations already converted to F32 (exactly: DriveF16Wide in gemm_avx2.cc converts
// each token block once instead of once per row group), two tokens per 512-bit register (lanes 0-7: token t,
// lanes 8-15: token t+1; an odd last token fills both halves and only the first is kept) and each weight vector
// in both halves: the FMAs are lane-wise on the same values, so every element gets exactly KFloat<LoadF16>'s
// operations (same FMA order, same Hsum per 256-bit half, same scalar tail). 6 rows x 4 token pairs keep 24
// accumulators in registers.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
struct KF16Zmm {
  static constexpr int kR = 6, kT = 8;
  template <int R, int T>
  __attribute__((target("avx2,fma,f16c,avx512f,avx512dq,avx512vl"))) static void Run(
      int64_t n, const uint8_t* const* w, const uint8_t* const* act, float* out) {
    constexpr int P = (T + 1) / 2;
    const float* a32[T];
    for (int t = 0; t < T; ++t) a32[t] = reinterpret_cast<const float*>(act[t]);
    __m512 acc[R][P];
    for (int r = 0; r < R; ++r)
      for (int p = 0; p < P; ++p) acc[r][p] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
      __m512 a[P];
#pragma GCC unroll 8
      for (int p = 0; p < P; ++p) {
        const float* second = a32[std::min(2 * p + 1, T - 1)] + i;
        a[p] = _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_loadu_ps(a32[2 * p] + i)), _mm256_loadu_ps(second), 1);
      }
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m512 wv =
            _mm512_cvtph_ps(_mm256_broadcastsi128_si256(Load128(reinterpret_cast<const uint16_t*>(w[r]) + i)));
#pragma GCC unroll 8
        for (int p = 0; p < P; ++p) acc[r][p] = _mm512_fmadd_ps(wv, a[p], acc[r][p]);
      }
    }
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) {
        const __m512 v = acc[r][t / 2];
        float sum = Hsum(t % 2 == 0 ? _mm512_castps512_ps256(v) : _mm512_extractf32x8_ps(v, 1));
        for (int64_t k = i; k < n; ++k) sum += ScalarF16(w[r], k) * a32[t][k];
        out[r * T + t] = sum;
      }
  }
};
#pragma GCC diagnostic pop

}  // namespace
}  // namespace rw::kernels::gemm_avx2
