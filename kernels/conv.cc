#include "kernels/conv.h"

namespace rw::kernels {

void CausalConvRun(float* state, const float* w, const float* x, int64_t x_stride, int64_t T, int64_t c0,
                   int64_t c1, int32_t Kc, float* y, int64_t y_stride) {
  const int32_t Ks = Kc - 1;
  for (int64_t c = c0; c < c1; ++c) {
    float* s = state + c * Ks;
    const float* wc = w + c * Kc;
    for (int64_t t = 0; t < T; ++t) {
      const float xt = x[t * x_stride + c];
      float sum = 0.0f;
      for (int32_t i = 0; i < Ks; ++i) sum += s[i] * wc[i];
      sum += xt * wc[Ks];
      for (int32_t i = 0; i + 1 < Ks; ++i) s[i] = s[i + 1];
      if (Ks > 0) s[Ks - 1] = xt;
      if (y != nullptr) y[t * y_stride + c] = sum;
    }
  }
}

}  // namespace rw::kernels
