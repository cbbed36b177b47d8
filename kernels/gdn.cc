#include "kernels/gdn.h"

#include <cmath>

#include "kernels/dot.h"

namespace rw::kernels {
namespace gdn_avx2 {
void HeadStep(float* M, const float* q, const float* k, const float* v, float beta, float decay, float scale,
              int32_t S, float* o, const float* M_in);  // kernels/gdn_avx2.cc
}  // namespace gdn_avx2
namespace gdn_avx512 {
void HeadStep(float* M, const float* q, const float* k, const float* v, float beta, float decay, float scale,
              int32_t S, float* o, const float* M_in);  // kernels/gdn_avx512.cc, S % 32 == 0
}  // namespace gdn_avx512

void GdnHeadStepSimd(int width, float* M, const float* q, const float* k, const float* v, float beta, float g,
                     int32_t S, float* o, const float* M_in) {
  const float decay = std::exp(g);
  const float scale = 1.0f / std::sqrt(static_cast<float>(S));
  if (M_in == nullptr) M_in = M;
  if (width == 512 && S % 32 == 0) return gdn_avx512::HeadStep(M, q, k, v, beta, decay, scale, S, o, M_in);
  gdn_avx2::HeadStep(M, q, k, v, beta, decay, scale, S, o, M_in);
}

void GdnHeadStep(float* M, const float* q, const float* k, const float* v, float beta, float g, int32_t S,
                 float* o, const float* M_in) {
  // Same bits on every path: AVX-512 halves the AVX2 instructions, AVX2 makes two passes per row instead of four.
  if (HasAvx2Fma()) return GdnHeadStepSimd(HasAvx512() ? 512 : 256, M, q, k, v, beta, g, S, o, M_in);
  GdnHeadStepPortable(M, q, k, v, beta, g, S, o, M_in);
}

void GdnHeadStepPortable(float* M, const float* q, const float* k, const float* v, float beta, float g, int32_t S,
                         float* o, const float* M_in) {
  const float decay = std::exp(g);
  const float scale = 1.0f / std::sqrt(static_cast<float>(S));
  if (M_in == nullptr) M_in = M;
  for (int32_t j = 0; j < S; ++j) {
    float* row = M + static_cast<int64_t>(j) * S;
    const float* src = M_in + static_cast<int64_t>(j) * S;
    for (int32_t i = 0; i < S; ++i) row[i] = src[i] * decay;
    const float kv = DotF32(row, k, S);
    const float delta = (v[j] - kv) * beta;
    for (int32_t i = 0; i < S; ++i) row[i] += k[i] * delta;
    if (o != nullptr) o[j] = DotF32(row, q, S) * scale;
  }
}

}  // namespace rw::kernels
