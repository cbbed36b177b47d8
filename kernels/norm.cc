#include "kernels/norm.h"

#include <cmath>

namespace rw::kernels {
namespace {
inline float InvRms(const float* x, int64_t n, float eps) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  return 1.0f / std::sqrt(mean + eps);
}
}  // namespace

void RmsNorm(const float* x, const float* w, int64_t n, float eps, float* out) {
  if (n <= 0) return;
  const float scale = InvRms(x, n, eps);
  if (w != nullptr) {
    for (int64_t i = 0; i < n; ++i) out[i] = (x[i] * scale) * w[i];
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale;
  }
}

void L2Norm(const float* x, int64_t n, float eps, float* out) {
  if (n <= 0) return;
  const float scale = InvRms(x, n, eps / static_cast<float>(n));
  const float post = 1.0f / std::sqrt(static_cast<float>(n));
  for (int64_t i = 0; i < n; ++i) out[i] = (x[i] * scale) * post;
}

}  // namespace rw::kernels
