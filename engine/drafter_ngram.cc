#include <algorithm>

#include "engine/drafter.h"

namespace rw::engine {
namespace {

class NgramDrafter final : public Drafter {
 public:
  explicit NgramDrafter(int32_t max_n) : max_n_(std::max(1, max_n)) {}
  const char* name() const override { return "ngram"; }
  void Begin(int32_t, std::span<const int32_t>) override {}
  void Observe(int32_t, int32_t, std::span<const int32_t>, std::span<const float>) override {}
  void Rollback(int32_t, int32_t) override {}
  void End(int32_t) override {}

  std::vector<int32_t> Draft(int32_t, std::span<const int32_t> ctx, int32_t n_max) override {
    std::vector<int32_t> out;
    const int64_t len = static_cast<int64_t>(ctx.size());
    for (int32_t n = std::min<int64_t>(max_n_, len - 1); n >= 1 && out.empty(); --n) {
      std::span<const int32_t> key = ctx.subspan(len - n, n);
      // Most recent earlier occurrence whose continuation is known.
      for (int64_t start = len - n - 1; start >= 0; --start) {
        if (!std::equal(key.begin(), key.end(), ctx.begin() + start)) continue;
        for (int64_t i = start + n; i < len && static_cast<int32_t>(out.size()) < n_max; ++i) out.push_back(ctx[i]);
        break;
      }
    }
    return out;
  }

 private:
  int32_t max_n_;
};

}  // namespace

std::unique_ptr<Drafter> MakeNgramDrafter(int32_t max_n) { return std::make_unique<NgramDrafter>(max_n); }

}  // namespace rw::engine
