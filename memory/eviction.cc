#include "memory/eviction.h"

#include <algorithm>
#include <cmath>

#include "base/check.h"

namespace rw::memory {

double EvictionScore(int64_t saved_tokens, int64_t bytes, uint64_t last_use, uint64_t now, int64_t half_life) {
  REWIND_CHECK(half_life > 0 && saved_tokens >= 0);
  if (saved_tokens == 0) return 0.0;
  double per_byte = static_cast<double>(saved_tokens) / static_cast<double>(std::max<int64_t>(bytes, 1));
  uint64_t age = now > last_use ? now - last_use : 0;
  return per_byte * std::exp2(-static_cast<double>(age) / static_cast<double>(half_life));
}

bool EvictsBefore(const EvictionCandidate& a, const EvictionCandidate& b, uint64_t now, int64_t half_life) {
  double sa = EvictionScore(a.saved_tokens, a.bytes, a.last_use, now, half_life);
  double sb = EvictionScore(b.saved_tokens, b.bytes, b.last_use, now, half_life);
  if (sa != sb) return sa < sb;
  if (a.last_use != b.last_use) return a.last_use < b.last_use;
  return a.node < b.node;
}

size_t PickVictim(std::span<const EvictionCandidate> candidates, uint64_t now, int64_t half_life) {
  REWIND_CHECK(!candidates.empty());
  size_t best = 0;
  for (size_t i = 1; i < candidates.size(); ++i)
    if (EvictsBefore(candidates[i], candidates[best], now, half_life)) best = i;
  return best;
}

}  // namespace rw::memory
