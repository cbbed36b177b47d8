#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <cmath>

namespace rw::engine {
namespace {

TEST(Sampler, GreedyPicksArgmaxWithLowestIdOnTies) {
  SamplingParams p;
  p.temperature = 0;
  Sampler s(p);
  std::vector<float> logits = {1, 3, 3, 2};
  EXPECT_EQ(s.Sample(logits), 1);
}

TEST(Sampler, SameSeedSameSequence) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 42;
  std::vector<float> logits = {0.1f, 0.2f, 0.3f, 0.4f, 0.0f, -1.0f};
  Sampler a(p), b(p);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(a.Sample(logits), b.Sample(logits));
}

TEST(Sampler, TopKOneIsGreedy) {
  SamplingParams p;
  p.temperature = 5.0f;
  p.top_k = 1;
  Sampler s(p);
  std::vector<float> logits = {0.1f, 0.9f, 0.3f};
  for (int i = 0; i < 20; ++i) EXPECT_EQ(s.Sample(logits), 1);
}

TEST(Sampler, LogprobsAreNormalised) {
  std::vector<float> logits = {1.0f, 2.0f, 3.0f};
  double sum = 0;
  for (int i = 0; i < 3; ++i) sum += std::exp(Sampler::Logprob(logits, i));
  EXPECT_NEAR(sum, 1.0, 1e-6);
  auto top = Sampler::TopLogprobs(logits, 2);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[0].token, 2);
  EXPECT_EQ(top[1].token, 1);
}

TEST(Sampler, SamplingFollowsTheDistribution) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 7;
  Sampler s(p);
  std::vector<float> logits = {0.0f, std::log(3.0f)};  // p = 0.25, 0.75
  int ones = 0;
  for (int i = 0; i < 4000; ++i) ones += s.Sample(logits);
  EXPECT_NEAR(ones / 4000.0, 0.75, 0.03);
}

}  // namespace
}  // namespace rw::engine
