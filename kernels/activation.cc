#include "kernels/activation.h"

#include "base/cpu_features.h"
#include "kernels/exp_approx_avx2.h"

namespace rw::kernels {
namespace {

__attribute__((target("avx2"))) inline __m256 Silu8(__m256 x) {
  const __m256 e = ExpApprox8(_mm256_sub_ps(_mm256_setzero_ps(), x));  // -x, as the scalar negation
  return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}
__attribute__((target("avx2"))) inline __m256 Sigmoid8(__m256 x) {
  const __m256 e = ExpApprox8(_mm256_sub_ps(_mm256_setzero_ps(), x));
  return _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

__attribute__((target("avx2"))) int64_t SwiGluAvx2(const float* gate, const float* up, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_mul_ps(Silu8(_mm256_loadu_ps(gate + i)), _mm256_loadu_ps(up + i)));
  return i;
}
__attribute__((target("avx2"))) int64_t SiluAvx2(float* x, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, Silu8(_mm256_loadu_ps(x + i)));
  return i;
}
__attribute__((target("avx2"))) int64_t MulSiluAvx2(float* o, const float* z, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(o + i, _mm256_mul_ps(_mm256_loadu_ps(o + i), Silu8(_mm256_loadu_ps(z + i))));
  return i;
}
__attribute__((target("avx2"))) int64_t MulSigmoidAvx2(float* o, const float* g, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(o + i, _mm256_mul_ps(_mm256_loadu_ps(o + i), Sigmoid8(_mm256_loadu_ps(g + i))));
  return i;
}

}  // namespace

// -x is exactly 0 - x except for x = +0 (gives +0, not -0); ExpApprox(+0) == ExpApprox(-0) == 1, so the
// scalar negation and the vector subtraction give the same result.
void SwiGlu(const float* gate, const float* up, int64_t n, float* out) {
  int64_t i = CpuHasAvx2Fma() ? SwiGluAvx2(gate, up, n, out) : 0;
  for (; i < n; ++i) out[i] = Silu(gate[i]) * up[i];
}

void SiluInPlace(float* x, int64_t n) {
  int64_t i = CpuHasAvx2Fma() ? SiluAvx2(x, n) : 0;
  for (; i < n; ++i) x[i] = Silu(x[i]);
}

void MulSilu(float* o, const float* z, int64_t n) {
  int64_t i = CpuHasAvx2Fma() ? MulSiluAvx2(o, z, n) : 0;
  for (; i < n; ++i) o[i] = o[i] * Silu(z[i]);
}

void MulSigmoid(float* o, const float* g, int64_t n) {
  int64_t i = CpuHasAvx2Fma() ? MulSigmoidAvx2(o, g, n) : 0;
  for (; i < n; ++i) o[i] = o[i] * Sigmoid(g[i]);
}

}  // namespace rw::kernels
