#include "kernels/ref/ssm_ref.h"

namespace rw::kernels::ref {

void SsmHeadStep(double* s, const float* x, const float* B, const float* C, double dt, double dA, int32_t P,
                 int32_t N, double* y) {
  for (int32_t p = 0; p < P; ++p) {
    double acc = 0.0;
    for (int32_t n = 0; n < N; ++n) {
      double& v = s[static_cast<int64_t>(p) * N + n];
      v = v * dA + static_cast<double>(B[n]) * x[p] * dt;
      acc += v * C[n];
    }
    if (y != nullptr) y[p] = acc;
  }
}

}  // namespace rw::kernels::ref
