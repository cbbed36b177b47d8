// AVX-512 tiles of the attention kernel (kernels/attention_avx512.h): same bits as the 256-bit and portable code.
#include "kernels/attention_avx512.h"

#include <immintrin.h>

#include <cmath>

#include "kernels/attention_reduce.h"

namespace rw::kernels::attention_avx512 {
namespace {

constexpr int32_t kStride = kAttnBlock * 8;  // floats between the lane groups of consecutive dims

// Lane sums of the two keys held by each of a query's four registers: 8 scores, keys in order.
inline __m256 ReduceQuery(__m512 k01, __m512 k23, __m512 k45, __m512 k67) {
  return AttnReduce8(_mm512_castps512_ps256(k01), _mm512_extractf32x8_ps(k01, 1), _mm512_castps512_ps256(k23),
                     _mm512_extractf32x8_ps(k23, 1), _mm512_castps512_ps256(k45), _mm512_extractf32x8_ps(k45, 1),
                     _mm512_castps512_ps256(k67), _mm512_extractf32x8_ps(k67, 1));
}

inline __m512 Broadcast8(const float* x) { return _mm512_broadcast_f32x8(_mm256_loadu_ps(x)); }

}  // namespace

// GCC 12's AVX-512 headers start extracts from _mm512_undefined_*(), which -Wmaybe-uninitialized flags.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

void PackKeyF32(const float* row, int32_t D, int32_t p, float* pk) {
  float* dst = pk + p * 8;
  for (int32_t d = 0; d < D; d += 8, dst += kStride) _mm256_storeu_ps(dst, _mm256_loadu_ps(row + d));
}

void PackKeyF16(const uint16_t* row, int32_t D, int32_t p, float* pk) {
  float* dst = pk + p * 8;
  for (int32_t d = 0; d < D; d += 8, dst += kStride)
    _mm256_storeu_ps(dst, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + d))));
}

void ScoreTile4x8(const float* const* q, const float* pk, int32_t p0, int32_t D, float scale, float* out) {
  const float *q0 = q[0], *q1 = q[1], *q2 = q[2], *q3 = q[3];
  const float* k = pk + p0 * 8;
  __m512 a00 = _mm512_setzero_ps(), a01 = a00, a02 = a00, a03 = a00, a10 = a00, a11 = a00, a12 = a00, a13 = a00;
  __m512 a20 = a00, a21 = a00, a22 = a00, a23 = a00, a30 = a00, a31 = a00, a32 = a00, a33 = a00;
  for (int32_t d = 0; d < D; d += 8, k += kStride) {
    const __m512 k0 = _mm512_loadu_ps(k), k1 = _mm512_loadu_ps(k + 16), k2 = _mm512_loadu_ps(k + 32),
                 k3 = _mm512_loadu_ps(k + 48);
    __m512 y = Broadcast8(q0 + d);
    a00 = _mm512_fmadd_ps(y, k0, a00);
    a01 = _mm512_fmadd_ps(y, k1, a01);
    a02 = _mm512_fmadd_ps(y, k2, a02);
    a03 = _mm512_fmadd_ps(y, k3, a03);
    y = Broadcast8(q1 + d);
    a10 = _mm512_fmadd_ps(y, k0, a10);
    a11 = _mm512_fmadd_ps(y, k1, a11);
    a12 = _mm512_fmadd_ps(y, k2, a12);
    a13 = _mm512_fmadd_ps(y, k3, a13);
    y = Broadcast8(q2 + d);
    a20 = _mm512_fmadd_ps(y, k0, a20);
    a21 = _mm512_fmadd_ps(y, k1, a21);
    a22 = _mm512_fmadd_ps(y, k2, a22);
    a23 = _mm512_fmadd_ps(y, k3, a23);
    y = Broadcast8(q3 + d);
    a30 = _mm512_fmadd_ps(y, k0, a30);
    a31 = _mm512_fmadd_ps(y, k1, a31);
    a32 = _mm512_fmadd_ps(y, k2, a32);
    a33 = _mm512_fmadd_ps(y, k3, a33);
  }
  const __m256 s = _mm256_set1_ps(scale);
  _mm256_storeu_ps(out, _mm256_mul_ps(ReduceQuery(a00, a01, a02, a03), s));
  _mm256_storeu_ps(out + kAttnBlock, _mm256_mul_ps(ReduceQuery(a10, a11, a12, a13), s));
  _mm256_storeu_ps(out + 2 * kAttnBlock, _mm256_mul_ps(ReduceQuery(a20, a21, a22, a23), s));
  _mm256_storeu_ps(out + 3 * kAttnBlock, _mm256_mul_ps(ReduceQuery(a30, a31, a32, a33), s));
}

namespace {

// Dims [d0, D) of one query after the 16-wide part: 8 at a time, then one by one (the same operations).
inline void ValueRest(float* acc, float corr, const float* e, const float* const* vrow, int32_t nb, int32_t d0,
                      int32_t D) {
  for (; d0 + 8 <= D; d0 += 8) {
    __m256 a = _mm256_mul_ps(_mm256_loadu_ps(acc + d0), _mm256_set1_ps(corr));
    for (int32_t p = 0; p < nb; ++p) a = _mm256_fmadd_ps(_mm256_set1_ps(e[p]), _mm256_loadu_ps(vrow[p] + d0), a);
    _mm256_storeu_ps(acc + d0, a);
  }
  for (; d0 < D; ++d0) {
    float x = acc[d0] * corr;
    for (int32_t p = 0; p < nb; ++p) x = std::fma(e[p], vrow[p][d0], x);
    acc[d0] = x;
  }
}

}  // namespace

void ValueTile4(float* const* acc, const float* corr, const float* const* e, const float* const* vrow, int32_t nb,
                int32_t D) {
  const float *e0 = e[0], *e1 = e[1], *e2 = e[2], *e3 = e[3];
  const __m512 c0 = _mm512_set1_ps(corr[0]), c1 = _mm512_set1_ps(corr[1]), c2 = _mm512_set1_ps(corr[2]),
               c3 = _mm512_set1_ps(corr[3]);
  int32_t d0 = 0;
  for (; d0 + 32 <= D; d0 += 32) {
    __m512 a0 = _mm512_mul_ps(_mm512_loadu_ps(acc[0] + d0), c0), b0 = _mm512_mul_ps(_mm512_loadu_ps(acc[0] + d0 + 16), c0);
    __m512 a1 = _mm512_mul_ps(_mm512_loadu_ps(acc[1] + d0), c1), b1 = _mm512_mul_ps(_mm512_loadu_ps(acc[1] + d0 + 16), c1);
    __m512 a2 = _mm512_mul_ps(_mm512_loadu_ps(acc[2] + d0), c2), b2 = _mm512_mul_ps(_mm512_loadu_ps(acc[2] + d0 + 16), c2);
    __m512 a3 = _mm512_mul_ps(_mm512_loadu_ps(acc[3] + d0), c3), b3 = _mm512_mul_ps(_mm512_loadu_ps(acc[3] + d0 + 16), c3);
    for (int32_t p = 0; p < nb; ++p) {
      const float* v = vrow[p] + d0;
      const __m512 v0 = _mm512_loadu_ps(v), v1 = _mm512_loadu_ps(v + 16);
      __m512 w = _mm512_set1_ps(e0[p]);
      a0 = _mm512_fmadd_ps(w, v0, a0);
      b0 = _mm512_fmadd_ps(w, v1, b0);
      w = _mm512_set1_ps(e1[p]);
      a1 = _mm512_fmadd_ps(w, v0, a1);
      b1 = _mm512_fmadd_ps(w, v1, b1);
      w = _mm512_set1_ps(e2[p]);
      a2 = _mm512_fmadd_ps(w, v0, a2);
      b2 = _mm512_fmadd_ps(w, v1, b2);
      w = _mm512_set1_ps(e3[p]);
      a3 = _mm512_fmadd_ps(w, v0, a3);
      b3 = _mm512_fmadd_ps(w, v1, b3);
    }
    _mm512_storeu_ps(acc[0] + d0, a0);
    _mm512_storeu_ps(acc[0] + d0 + 16, b0);
    _mm512_storeu_ps(acc[1] + d0, a1);
    _mm512_storeu_ps(acc[1] + d0 + 16, b1);
    _mm512_storeu_ps(acc[2] + d0, a2);
    _mm512_storeu_ps(acc[2] + d0 + 16, b2);
    _mm512_storeu_ps(acc[3] + d0, a3);
    _mm512_storeu_ps(acc[3] + d0 + 16, b3);
  }
  for (; d0 + 16 <= D; d0 += 16) {
    __m512 a0 = _mm512_mul_ps(_mm512_loadu_ps(acc[0] + d0), c0), a1 = _mm512_mul_ps(_mm512_loadu_ps(acc[1] + d0), c1);
    __m512 a2 = _mm512_mul_ps(_mm512_loadu_ps(acc[2] + d0), c2), a3 = _mm512_mul_ps(_mm512_loadu_ps(acc[3] + d0), c3);
    for (int32_t p = 0; p < nb; ++p) {
      const __m512 v0 = _mm512_loadu_ps(vrow[p] + d0);
      a0 = _mm512_fmadd_ps(_mm512_set1_ps(e0[p]), v0, a0);
      a1 = _mm512_fmadd_ps(_mm512_set1_ps(e1[p]), v0, a1);
      a2 = _mm512_fmadd_ps(_mm512_set1_ps(e2[p]), v0, a2);
      a3 = _mm512_fmadd_ps(_mm512_set1_ps(e3[p]), v0, a3);
    }
    _mm512_storeu_ps(acc[0] + d0, a0);
    _mm512_storeu_ps(acc[1] + d0, a1);
    _mm512_storeu_ps(acc[2] + d0, a2);
    _mm512_storeu_ps(acc[3] + d0, a3);
  }
  for (int i = 0; i < 4; ++i) ValueRest(acc[i], corr[i], e[i], vrow, nb, d0, D);
}

void ValueOne(float* acc, float corr, const float* e, const float* const* vrow, int32_t nb, int32_t D) {
  const __m512 c = _mm512_set1_ps(corr);
  int32_t d0 = 0;
  for (; d0 + 64 <= D; d0 += 64) {
    __m512 a0 = _mm512_mul_ps(_mm512_loadu_ps(acc + d0), c), a1 = _mm512_mul_ps(_mm512_loadu_ps(acc + d0 + 16), c);
    __m512 a2 = _mm512_mul_ps(_mm512_loadu_ps(acc + d0 + 32), c), a3 = _mm512_mul_ps(_mm512_loadu_ps(acc + d0 + 48), c);
    for (int32_t p = 0; p < nb; ++p) {
      const float* v = vrow[p] + d0;
      const __m512 w = _mm512_set1_ps(e[p]);
      a0 = _mm512_fmadd_ps(w, _mm512_loadu_ps(v), a0);
      a1 = _mm512_fmadd_ps(w, _mm512_loadu_ps(v + 16), a1);
      a2 = _mm512_fmadd_ps(w, _mm512_loadu_ps(v + 32), a2);
      a3 = _mm512_fmadd_ps(w, _mm512_loadu_ps(v + 48), a3);
    }
    _mm512_storeu_ps(acc + d0, a0);
    _mm512_storeu_ps(acc + d0 + 16, a1);
    _mm512_storeu_ps(acc + d0 + 32, a2);
    _mm512_storeu_ps(acc + d0 + 48, a3);
  }
  for (; d0 + 16 <= D; d0 += 16) {
    __m512 a0 = _mm512_mul_ps(_mm512_loadu_ps(acc + d0), c);
    for (int32_t p = 0; p < nb; ++p) a0 = _mm512_fmadd_ps(_mm512_set1_ps(e[p]), _mm512_loadu_ps(vrow[p] + d0), a0);
    _mm512_storeu_ps(acc + d0, a0);
  }
  ValueRest(acc, corr, e, vrow, nb, d0, D);
}

#pragma GCC diagnostic pop

}  // namespace rw::kernels::attention_avx512
