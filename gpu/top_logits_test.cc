// The device top-K of logits rows (top_logits.comp) against its scalar twin kernels::TopLogits, bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "gpu/gpu_testing.h"
#include "gpu/ops.h"
#include "kernels/top_logits.h"

namespace rw::gpu {
namespace {

using testing::Down;
using testing::Up;

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// Random rows with what the order must get right: many exact ties (values on a coarse grid), -inf, NaN (both
// signs), -0.0 next to +0.0, denormals, +inf, and ties at the k-th place.
std::vector<float> Rows(uint32_t rows, uint32_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> v(static_cast<size_t>(rows) * n);
  for (auto& x : v) {
    const uint64_t r = rng() % 1000;
    if (r < 3) x = -std::numeric_limits<float>::infinity();
    else if (r < 4) x = std::numeric_limits<float>::quiet_NaN();
    else if (r < 5) x = -std::numeric_limits<float>::quiet_NaN();
    else if (r < 7) x = (r == 5 ? -0.0f : 0.0f);
    else if (r < 8) x = std::numeric_limits<float>::denorm_min() * static_cast<float>(rng() % 5);
    else x = static_cast<float>(static_cast<int>(rng() % 4000) - 2000) / 64.0f;  // ties
  }
  if (rows > 1) v[n + (77 % n)] = std::numeric_limits<float>::infinity();  // in row 1 whatever n is
  if (rows > 2)
    for (uint32_t i = 0; i < n; ++i) v[2 * static_cast<size_t>(n) + i] = 1.0f;  // one row of exact ties
  if (rows > 3)
    for (uint32_t i = 0; i < n; ++i) v[3 * static_cast<size_t>(n) + i] = -std::numeric_limits<float>::infinity();
  return v;
}

void Check(Context& ctx, uint32_t rows, uint32_t n, uint32_t k, uint64_t seed) {
  const std::vector<float> v = Rows(rows, n, seed);
  Buffer lb = Up(ctx, v);
  TopLogitsScratch s;
  const Buffer* res = nullptr;
  ASSERT_TRUE(RecordTopLogits(ctx, lb, rows, n, k, s, &res).ok());
  ASSERT_TRUE(ctx.Submit().ok());
  const std::vector<kernels::TopLogit> got = Down<kernels::TopLogit>(ctx, *res, static_cast<size_t>(rows) * k);
  std::vector<kernels::TopLogit> want(k);
  for (uint32_t r = 0; r < rows; ++r) {
    kernels::TopLogits(std::span<const float>(v).subspan(static_cast<size_t>(r) * n, n), static_cast<int32_t>(k),
                       want.data());
    for (uint32_t i = 0; i < k; ++i) {
      const kernels::TopLogit& g = got[static_cast<size_t>(r) * k + i];
      ASSERT_EQ(g.id, want[i].id) << "n " << n << " k " << k << " row " << r << " place " << i;
      ASSERT_EQ(Bits(g.logit), Bits(want[i].logit)) << "n " << n << " k " << k << " row " << r << " place " << i;
      ASSERT_FALSE(std::isnan(g.logit));
    }
  }
}

TEST(GpuTopLogits, SelectsTheCpusPairsBitForBitOnRealVocabularies) {
  std::string why;
  auto ctx = testing::Device(&why);
  if (!ctx) GTEST_SKIP() << why;
  for (uint32_t n : {151936u, 248320u})
    for (uint32_t k : {1u, 40u, 128u}) Check(*ctx, 4, n, k, n + k);
}

TEST(GpuTopLogits, SelectsTheCpusPairsOnSmallAndOddSizes) {
  std::string why;
  auto ctx = testing::Device(&why);
  if (!ctx) GTEST_SKIP() << why;
  for (uint32_t n : {1u, 5u, 128u, 1023u, 1024u, 1025u, 3000u, 130001u})
    for (uint32_t k : {1u, 2u, 64u, 128u})
      if (k <= n) Check(*ctx, 5, n, k, 7 * n + k);
}

TEST(GpuTopLogits, FoldsManyRowsOverTheWorkgroupLimit) {
  std::string why;
  auto ctx = testing::Device(&why);
  if (!ctx) GTEST_SKIP() << why;
  ctx->LimitForTesting(16, 0);  // 20 rows x 10 blocks = 200 groups: 16 x 13, folded into y
  Check(*ctx, 20, 10000, 17, 3);
  ctx->LimitForTesting(0, 0);
}

}  // namespace
}  // namespace rw::gpu
