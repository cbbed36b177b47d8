// Scalar reference twin of kernels/ssm.h: the Mamba-2 state update of one head and one token in double, in
// the spec's indexing (s[p][n]). Used only by tests (fast vs twin within tolerance).
#pragma once

#include <cstdint>

namespace rw::kernels::ref {

// s[p][n] <- s[p][n]·dA + B[n]·x[p]·dt;  y[p] = Σ_n s[p][n]·C[n] (y may be null). s: [P][N] in double.
void SsmHeadStep(double* s, const float* x, const float* B, const float* C, double dt, double dA, int32_t P,
                 int32_t N, double* y);

}  // namespace rw::kernels::ref
