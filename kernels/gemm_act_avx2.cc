// AVX2 activation quantisation behind kernels/gemm_act.h. Compiled with -mavx2 -mfma -mf16c
// -ffp-contract=off and called only after the CPU check. Each value goes through exactly the float operations
// of the scalar code in gguf/quants.cc (QuantQ8_0Cpu) and gguf/quants_k.cc (QuantQ8_K):
//   - the block maximum of |x| is a max, exact in any order; _mm256_max_ps(|x|, acc) skips a NaN |x| as
//     std::max(acc, |x|) and `if (|x| > amax)` do;
//   - the per-block scale is computed by the same scalar expression;
//   - x * id, the 1.5 * 2^23 rounding add (and subtract) are the same IEEE single operations lane by lane;
//   - integer conversion, clamping and the bsums are exact integer steps.
#include <immintrin.h>

#include <cstring>

#include "gguf/quants.h"

namespace rw::kernels::gemm_act_avx2 {

using gguf::BlockQ8_0;
using gguf::BlockQ8_K;

namespace {

inline __m256 Abs(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }

inline float HMax(__m256 v) {  // values are >= 0 and not NaN: order does not matter
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

// 4 x 8 int32 lanes (already in [-128, 127]) -> 32 int8 in element order.
inline __m256i PackInt8(__m256i a, __m256i b, __m256i c, __m256i d) {
  const __m256i ab = _mm256_packs_epi32(a, b);  // a0-3 b0-3 | a4-7 b4-7
  const __m256i cd = _mm256_packs_epi32(c, d);
  const __m256i v = _mm256_packs_epi16(ab, cd);  // a0-3 b0-3 c0-3 d0-3 | a4-7 b4-7 c4-7 d4-7
  return _mm256_permutevar8x32_epi32(v, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

}  // namespace

void QuantQ8_0(const float* x, BlockQ8_0* y, int64_t nb) {
  const __m256 magic = _mm256_set1_ps(12582912.f);
  const __m256 lo = _mm256_set1_ps(-128.f), hi = _mm256_set1_ps(127.f);
  for (int64_t i = 0; i < nb; ++i, x += gguf::kQK) {
    __m256 v[4];
    __m256 amax = _mm256_setzero_ps();
    for (int k = 0; k < 4; ++k) {
      v[k] = _mm256_loadu_ps(x + 8 * k);
      amax = _mm256_max_ps(Abs(v[k]), amax);
    }
    const float m = HMax(amax);
    const float id = m != 0.0f ? 127.f / m : 0.0f;
    y[i].d = gguf::Fp32ToFp16(m / 127.f);
    const __m256 vid = _mm256_set1_ps(id);
    __m256i q[4];
    for (int k = 0; k < 4; ++k) {
      __m256 r = _mm256_sub_ps(_mm256_add_ps(_mm256_mul_ps(v[k], vid), magic), magic);
      r = _mm256_and_ps(r, _mm256_cmp_ps(r, r, _CMP_ORD_Q));  // NaN -> 0 (TruncToInt)
      r = _mm256_min_ps(_mm256_max_ps(r, lo), hi);
      q[k] = _mm256_cvttps_epi32(r);
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[i].qs), PackInt8(q[0], q[1], q[2], q[3]));
  }
}

void QuantQ8_K(const float* x, BlockQ8_K* y, int64_t nb) {
  constexpr int kN = gguf::kQK_K / 8;  // 32 vectors of 8
  const __m256 magic = _mm256_set1_ps(12582912.f);
  const __m256i mant = _mm256_set1_epi32(0x007FFFFF), bias = _mm256_set1_epi32(0x00400000);
  const __m256i lo = _mm256_set1_epi32(-128), hi = _mm256_set1_epi32(127);
  const __m256i ones8 = _mm256_set1_epi8(1);
  const __m256i ones16 = _mm256_set1_epi16(1);
  for (int64_t i = 0; i < nb; ++i, x += gguf::kQK_K) {
    __m256 acc = _mm256_setzero_ps();
    for (int k = 0; k < kN; ++k) acc = _mm256_max_ps(Abs(_mm256_loadu_ps(x + 8 * k)), acc);
    const float amax = HMax(acc);
    if (!amax) {
      std::memset(&y[i], 0, sizeof(BlockQ8_K));
      continue;
    }
    // max: the first x whose |x| is amax (the scalar loop keeps the first strictly larger one).
    float max = 0.0f;
    const __m256 va = _mm256_set1_ps(amax);
    for (int k = 0; k < kN; ++k) {
      const int mask = _mm256_movemask_ps(_mm256_cmp_ps(Abs(_mm256_loadu_ps(x + 8 * k)), va, _CMP_EQ_OQ));
      if (mask != 0) {
        max = x[8 * k + __builtin_ctz(static_cast<unsigned>(mask))];
        break;
      }
    }
    const float iscale = -127.f / max;
    const __m256 vs = _mm256_set1_ps(iscale);
    __m256i sums[8];
    for (int c = 0; c < 8; ++c) {  // 32 values per chunk
      __m256i q[4];
      for (int k = 0; k < 4; ++k) {
        const __m256 f = _mm256_add_ps(_mm256_mul_ps(vs, _mm256_loadu_ps(x + 32 * c + 8 * k)), magic);
        const __m256i n = _mm256_sub_epi32(_mm256_and_si256(_mm256_castps_si256(f), mant), bias);
        q[k] = _mm256_min_epi32(_mm256_max_epi32(n, lo), hi);
      }
      const __m256i packed = PackInt8(q[0], q[1], q[2], q[3]);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[i].qs + 32 * c), packed);
      // int32 lanes: sums of 4 consecutive values; lanes 0-3 = elements 0-15, lanes 4-7 = elements 16-31.
      sums[c] = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, packed), ones16);
    }
    // bsums[g] = sum of elements 16g..16g+15.
    const __m256i h01 = _mm256_hadd_epi32(sums[0], sums[1]), h23 = _mm256_hadd_epi32(sums[2], sums[3]);
    const __m256i h45 = _mm256_hadd_epi32(sums[4], sums[5]), h67 = _mm256_hadd_epi32(sums[6], sums[7]);
    const __m256i k0 = _mm256_hadd_epi32(h01, h23);  // G0 G2 G4 G6 | G1 G3 G5 G7
    const __m256i k1 = _mm256_hadd_epi32(h45, h67);  // G8 G10 G12 G14 | G9 G11 G13 G15
    const __m256i p = _mm256_packs_epi32(k0, k1);    // G0 G2 .. G14 | G1 G3 .. G15
    const __m128i even = _mm256_castsi256_si128(p), odd = _mm256_extracti128_si256(p, 1);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y[i].bsums), _mm_unpacklo_epi16(even, odd));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y[i].bsums + 8), _mm_unpackhi_epi16(even, odd));
    y[i].d = 1 / iscale;
  }
}

}  // namespace rw::kernels::gemm_act_avx2
