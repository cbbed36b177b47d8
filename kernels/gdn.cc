#include "kernels/gdn.h"

#include <cmath>

#include "kernels/dot.h"

namespace rw::kernels {

void GdnHeadStep(float* M, const float* q, const float* k, const float* v, float beta, float g, int32_t S,
                 float* o) {
  const float decay = std::exp(g);
  const float scale = 1.0f / std::sqrt(static_cast<float>(S));
  for (int32_t j = 0; j < S; ++j) {
    float* row = M + static_cast<int64_t>(j) * S;
    for (int32_t i = 0; i < S; ++i) row[i] *= decay;
    const float kv = DotF32(row, k, S);
    const float delta = (v[j] - kv) * beta;
    for (int32_t i = 0; i < S; ++i) row[i] += k[i] * delta;
    if (o != nullptr) o[j] = DotF32(row, q, S) * scale;
  }
}

}  // namespace rw::kernels
