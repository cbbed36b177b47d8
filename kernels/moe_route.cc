// The softmax router's row function (kernels/moe_route.h).
#include "kernels/moe_route.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace rw::kernels {

void SoftmaxTopK(float* l, int32_t X, int32_t K, int32_t* sel, float* wt) {
  float mx = -INFINITY;
  for (int32_t e = 0; e < X; ++e) mx = std::max(mx, l[e]);
  double sum = 0.0;
  for (int32_t e = 0; e < X; ++e) {
    l[e] = std::exp(l[e] - mx);
    sum += l[e];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int32_t e = 0; e < X; ++e) l[e] *= inv;
  thread_local std::vector<int32_t> idx;
  idx.resize(static_cast<size_t>(X));
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) { return l[a] > l[b]; });
  float s = 0.0f;
  for (int32_t k = 0; k < K; ++k) {
    sel[k] = idx[k];
    wt[k] = l[idx[k]];
    s += wt[k];
  }
  s = std::max(s, 6.103515625e-5f);
  for (int32_t k = 0; k < K; ++k) wt[k] /= s;
}

}  // namespace rw::kernels
