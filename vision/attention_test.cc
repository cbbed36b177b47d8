#include "vision/attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace rw::vision {
namespace {

struct Shape {
  int32_t n, H, D;
};

// Uniform in [-2, 2) from the raw generator (portable bits, unlike the standard distributions).
std::vector<float> RandomQkv(const Shape& s, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> qkv(static_cast<size_t>(s.n) * 3 * s.H * s.D);
  for (float& x : qkv) x = static_cast<float>(rng() >> 8) * (4.0f / 16777216.0f) - 2.0f;
  return qkv;
}

std::vector<float> Attend(const std::vector<float>& qkv, const Shape& s, int threads, AttnIsa isa) {
  std::vector<float> out(static_cast<size_t>(s.n) * s.H * s.D, NAN);
  kernels::ThreadPool pool(threads);
  VisionAttention(qkv.data(), s.n, s.H, s.D, 1.0f / std::sqrt(static_cast<float>(s.D)), out.data(), &pool,
                  nullptr, isa);
  return out;
}

// The textbook formula in double.
std::vector<double> Reference(const std::vector<float>& qkv, const Shape& s) {
  const int64_t E = static_cast<int64_t>(s.H) * s.D, stride = 3 * E;
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.D));
  std::vector<double> out(static_cast<size_t>(s.n) * E), p(s.n);
  for (int32_t h = 0; h < s.H; ++h)
    for (int32_t i = 0; i < s.n; ++i) {
      double mx = -INFINITY, sum = 0;
      for (int32_t j = 0; j < s.n; ++j) {
        double dot = 0;
        for (int32_t d = 0; d < s.D; ++d)
          dot += static_cast<double>(qkv[i * stride + h * s.D + d]) * qkv[j * stride + E + h * s.D + d];
        p[j] = dot * scale;
        mx = std::max(mx, p[j]);
      }
      for (int32_t j = 0; j < s.n; ++j) sum += p[j] = std::exp(p[j] - mx);
      for (int32_t d = 0; d < s.D; ++d) {
        double o = 0;
        for (int32_t j = 0; j < s.n; ++j) o += p[j] * qkv[j * stride + 2 * E + h * s.D + d];
        out[i * E + h * s.D + d] = o / sum;
      }
    }
  return out;
}

uint64_t Digest(const std::vector<float>& v) {
  uint64_t h = 1469598103934665603ull;
  for (float x : v) {
    uint32_t b;
    std::memcpy(&b, &x, 4);
    for (int k = 0; k < 4; ++k) h = (h ^ ((b >> (8 * k)) & 0xFF)) * 1099511628211ull;
  }
  return h;
}

// Odd sizes (tails of every tile, chunk and lane group), the Qwen3.5 head (D 72) past one key chunk, tiny
// ones.
const Shape kShapes[] = {{37, 3, 20}, {300, 2, 72}, {64, 1, 8}, {5, 2, 3}, {130, 1, 97}, {1, 1, 1}};

class VisionAttentionIsa : public ::testing::TestWithParam<AttnIsa> {
 protected:
  void SetUp() override {
    if (!AttnIsaAvailable(GetParam()))
      GTEST_SKIP() << "this CPU lacks " << AttnIsaName(GetParam()) << ": its twin cannot run here";
  }
};

TEST_P(VisionAttentionIsa, MatchesTheDoubleReference) {
  for (const Shape& s : kShapes) {
    const auto qkv = RandomQkv(s, 11);
    const auto got = Attend(qkv, s, 1, GetParam());
    const auto want = Reference(qkv, s);
    double worst = 0;
    for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - want[i]));
    EXPECT_LT(worst, 2e-5) << "n " << s.n << " H " << s.H << " D " << s.D;
  }
}

TEST_P(VisionAttentionIsa, GivesTheScalarTwinsBits) {
  for (const Shape& s : kShapes) {
    const auto qkv = RandomQkv(s, 12);
    const auto got = Attend(qkv, s, 1, GetParam()), want = Attend(qkv, s, 1, AttnIsa::kScalar);
    ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)))
        << "n " << s.n << " H " << s.H << " D " << s.D;
  }
}

TEST_P(VisionAttentionIsa, BitsDoNotDependOnTheThreadCount) {
  for (const Shape& s : kShapes) {
    const auto qkv = RandomQkv(s, 13);
    const auto one = Attend(qkv, s, 1, GetParam());
    for (int threads : {2, 3}) {
      const auto many = Attend(qkv, s, threads, GetParam());
      ASSERT_EQ(0, std::memcmp(one.data(), many.data(), one.size() * sizeof(float)))
          << threads << " threads, n " << s.n << " H " << s.H << " D " << s.D;
    }
  }
}

// Buffers kept across calls of other shapes (larger first, so stale data sits in the padding) change nothing.
TEST_P(VisionAttentionIsa, ReusedBuffersGiveTheSameBits) {
  VisionAttentionBuffers buffers;
  kernels::ThreadPool pool(2);
  for (const Shape& s : {Shape{300, 2, 72}, Shape{37, 3, 20}, Shape{130, 1, 97}, Shape{5, 2, 3}}) {
    const auto qkv = RandomQkv(s, 15);
    std::vector<float> got(static_cast<size_t>(s.n) * s.H * s.D, NAN);
    VisionAttention(qkv.data(), s.n, s.H, s.D, 1.0f / std::sqrt(static_cast<float>(s.D)), got.data(), &pool,
                    &buffers, GetParam());
    const auto want = Attend(qkv, s, 2, GetParam());
    ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)))
        << "n " << s.n << " H " << s.H << " D " << s.D;
  }
}

// The arithmetic order of attention.h is fixed: these bits hold on any CPU, ISA and thread count.
TEST_P(VisionAttentionIsa, PinnedBits) {
  const Shape s{300, 2, 72};
  const auto qkv = RandomQkv(s, 14);
  for (int threads : {1, 2, 3})
    EXPECT_EQ(Digest(Attend(qkv, s, threads, GetParam())), 0xddcc78ae69fdb3c2ull) << threads << " threads";
}

INSTANTIATE_TEST_SUITE_P(Twins, VisionAttentionIsa,
                         ::testing::Values(AttnIsa::kScalar, AttnIsa::kAvx2, AttnIsa::kAvx512),
                         [](const auto& info) { return std::string(AttnIsaName(info.param)); });

}  // namespace
}  // namespace rw::vision
