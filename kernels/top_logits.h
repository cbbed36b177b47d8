// The K best logits of a row, for sampling from candidates instead of the whole vocabulary (docs/gpu.md):
// descending logit, ties to the lower token id (the sampler's `Better` order, engine/sampler_stages.h), NaN
// counted and returned as -inf. The scalar twin of gpu/shaders/top_logits.comp, which selects the same pairs
// bit for bit (no arithmetic on the values: -0.0 stays -0.0 and compares equal to +0.0).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

namespace rw::kernels {

struct TopLogit {
  float logit = 0.0f;
  int32_t id = 0;
};

// The largest K the forward hands out (ForwardOptions::top_k): llama-server clients' top_k values (20, 40, 50,
// 64, 100) fit, and one device pass of 1,024 entries keeps at most an eighth of them.
inline constexpr int32_t kMaxTopLogits = 128;

inline bool TopLogitBetter(const TopLogit& a, const TopLogit& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

// out[0, min(k, row.size())) = the best entries of row, in order.
inline void TopLogits(std::span<const float> row, int32_t k, TopLogit* out) {
  const size_t n = std::min(row.size(), static_cast<size_t>(std::max(k, 0)));
  std::vector<TopLogit> all(row.size());
  for (size_t i = 0; i < row.size(); ++i)
    all[i] = {std::isnan(row[i]) ? -std::numeric_limits<float>::infinity() : row[i], static_cast<int32_t>(i)};
  std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(n), all.end(), TopLogitBetter);
  std::copy(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(n), out);
}

}  // namespace rw::kernels
