// Row norms as llama.cpp computes them: Σx² accumulated in double (each product rounded to float first), the
// mean and 1/sqrt(mean + eps) in float. Per row, no cross-row reduction.
#pragma once

#include <cstdint>

namespace rw::kernels {

// out[i] = (x[i] · 1/sqrt(mean(x²) + eps)) · w[i]; w may be null (no weight). out may alias x.
void RmsNorm(const float* x, const float* w, int64_t n, float eps, float* out);
// L2 normalisation as llama.cpp's GDN does it: rms_norm(x, eps/n) · (1/sqrt(n)) ≈ x / sqrt(Σx² + eps).
void L2Norm(const float* x, int64_t n, float eps, float* out);

}  // namespace rw::kernels
