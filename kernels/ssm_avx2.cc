// AVX2 version of SsmHeadSteps (kernels/ssm.h), compiled with -mavx2 -mfma -mf16c -ffp-contract=off and
// called only after a CPU check. Per token, one pass over a state row does the update (multiply, multiply,
// add: the portable operations) and the 8-lane FMA dot with C; Hsum is the documented lane order, the N % 8
// tail is the same scalar FMA chain as the portable loop, so both give the same bits.
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <span>

#include "kernels/avx2_blocks.h"
#include "kernels/ssm.h"

namespace rw::kernels::ssm_avx2 {

void HeadRows(float* s, const float* s_in, std::span<const SsmToken> tokens, int32_t p0, int32_t p1,
              int32_t N) {
  const int32_t nv = N - N % 8;
  for (int32_t p = p0; p < p1; ++p) {
    float* row = s + static_cast<int64_t>(p) * N;
    const float* src = s_in + static_cast<int64_t>(p) * N;
    for (const SsmToken& k : tokens) {
      const float xdt = k.x[p] * k.dt;
      const __m256 va = _mm256_set1_ps(k.dA), vx = _mm256_set1_ps(xdt);
      __m256 acc = _mm256_setzero_ps();
      for (int32_t n = 0; n < nv; n += 8) {
        const __m256 r = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(src + n), va),
                                       _mm256_mul_ps(_mm256_loadu_ps(k.B + n), vx));
        _mm256_storeu_ps(row + n, r);
        acc = _mm256_fmadd_ps(r, _mm256_loadu_ps(k.C + n), acc);
      }
      for (int32_t n = nv; n < N; ++n) {
        const float a = src[n] * k.dA;
        const float b = k.B[n] * xdt;
        row[n] = a + b;
      }
      src = row;
      if (k.y == nullptr) continue;
      float sum = avx2_blocks::Hsum(acc);
      for (int32_t n = nv; n < N; ++n) sum = std::fma(row[n], k.C[n], sum);
      k.y[p] = sum;
    }
  }
}

}  // namespace rw::kernels::ssm_avx2
