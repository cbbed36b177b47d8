// AVX-512 version of GdnHeadStep for S % 32 == 0 (kernels/gdn.h), compiled with -mavx512f -mavx512dq
// -ffp-contract=off and only called after the CPU check in gdn.cc. It gives the bits of the AVX2 and portable
// code: a 16-lane register holds two of DotF32's 8-lane accumulators (lanes 0-7 = acc0 over elements i..i+7,
// lanes 8-15 = acc1 over i+8..i+15, and likewise acc2 | acc3), so every lane does the same FMAs in the same
// order; the final sum splits them back and adds (acc0 + acc1) + (acc2 + acc3), then the fixed lane order.
// The decay and the rank-1 update are a plain multiply and a multiply then an add, as in the portable loop.
#include <immintrin.h>

#include <cstdint>

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

}  // namespace

// GCC 12's AVX-512 headers start extracts from _mm512_undefined_*(), which -Wmaybe-uninitialized flags.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
void HeadStep(float* M, const float* q, const float* k, const float* v, float beta, float decay, float scale,
              int32_t S, float* o, const float* M_in, int32_t rows) {
  const __m512 vd = _mm512_set1_ps(decay);
  for (int32_t j = 0; j < rows; ++j) {
    float* row = M + static_cast<int64_t>(j) * S;
    const float* src = M_in + static_cast<int64_t>(j) * S;  // the decay reads the state from here (maybe row)
    __m512 a01 = _mm512_setzero_ps(), a23 = _mm512_setzero_ps();
    for (int32_t i = 0; i < S; i += 32) {
      const __m512 r0 = _mm512_mul_ps(_mm512_loadu_ps(src + i), vd);
      const __m512 r1 = _mm512_mul_ps(_mm512_loadu_ps(src + i + 16), vd);
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
#pragma GCC diagnostic pop

}  // namespace rw::kernels::gdn_avx512
