// The engine samples from the forward's top-k pairs (EngineConfig::sample_top_k, docs/api.md "Sampling"): a
// seeded top-k generation gives the same tokens with and without it (a greedy one with speculation), on the CPU and on
// vulkan0 where Vulkan exists; a request that needs the full row (logprobs, top-p first, penalties) keeps
// getting it.
#include <gtest/gtest.h>

#include <string>

#include "engine/collect_sink.h"
#include "engine/engine_config.h"
#include "gpu/device.h"

namespace rw::engine {
namespace {

using testing::Collect;

const std::string kQ8Model = std::string(REWIND_TEST_DATA) + "/golden/models/tiny-qwen35-q8_0.gguf";

std::unique_ptr<Engine> MakeEngine(bool sample_top_k, int32_t device, const std::string& spec = "") {
  EngineConfig c;
  c.model_path = kQ8Model;
  c.device = device;
  c.n_ctx = 512;
  c.n_parallel = 2;
  c.n_threads = 2;
  c.n_batch = 64;
  c.kv_type = "f32";
  c.cache = false;
  c.cache_ram_mib = 128;
  c.spec = spec;
  c.draft_max = 4;
  c.sample_top_k = sample_top_k;
  auto e = CreateEngine(c);
  EXPECT_TRUE(e.ok()) << (e.ok() ? "" : e.error().ToString());
  return e.ok() ? std::move(e).value() : nullptr;
}

// The value of one Prometheus line `name V` (-1: absent).
long long Metric(Engine& e, const std::string& name) {
  const std::string text = e.MetricsText();
  const size_t at = text.find("\n" + name + " ");
  return at == std::string::npos ? -1 : std::stoll(text.substr(at + name.size() + 2));
}

std::vector<int32_t> Prompt(int32_t variant = 0) {
  // A repeated phrase, so the n-gram drafter finds drafts to verify.
  std::vector<int32_t> p;
  for (int r = 0; r < 5; ++r)
    for (int32_t t : {17, 230, 1041, 9, 388, 2711, 64, 1500, 3, 777, 42, 2048}) p.push_back((t + 97 * variant) % 3900);
  return p;
}

std::shared_ptr<Collect> Generate(Engine& e, const SamplingParams& s, bool logprobs = false, int n = 32,
                                  int32_t variant = 0) {
  GenerationRequest r;
  r.prompt = Prompt(variant);
  r.max_tokens = n;
  r.sampling = s;
  r.logprobs = logprobs;
  r.ignore_eos = true;
  auto sink = std::make_shared<Collect>();
  auto id = e.Submit(r, sink);
  EXPECT_TRUE(id.ok()) << (id.ok() ? "" : id.error().ToString());
  sink->Wait();
  EXPECT_FALSE(sink->done.error.has_value()) << sink->done.error->ToString();
  EXPECT_EQ(sink->tokens.size(), static_cast<size_t>(n));
  return sink;
}

SamplingParams TopK40(uint64_t seed) {
  SamplingParams s;
  s.top_k = 40;
  s.temperature = 0.8f;
  s.seed = seed;
  return s;
}

// For each seed: the same tokens from full rows and from the top-k pairs; the top-k engine ran its decode
// batches on pairs (the metric), the other never did. With a drafter the requests are greedy (top-k 40,
// temperature 0: one pair per row) on prompts that vary with the seed: where the engine drafts depends on
// measured step times (back-off), and a sampled sequence depends on where drafts were verified (speculation
// keeps the distribution, not the draws), while a greedy one does not (I1). SamplerCandidates.* checks sampled
// speculative steps from pairs against full rows, verdict by verdict.
void ExpectSameTokens(int32_t device, const std::string& spec, std::vector<uint64_t> seeds = {1, 2, 3, 1234}) {
  auto on = MakeEngine(true, device, spec);
  auto off = MakeEngine(false, device, spec);
  ASSERT_TRUE(on && off);
  int differ_between_seeds = 0;
  std::vector<int32_t> first;
  for (uint64_t seed : seeds) {
    SamplingParams s = TopK40(seed);
    if (!spec.empty()) s.temperature = 0;
    const int32_t variant = spec.empty() ? 0 : static_cast<int32_t>(seed);
    auto a = Generate(*on, s, false, 32, variant);
    auto b = Generate(*off, s, false, 32, variant);
    EXPECT_EQ(a->tokens, b->tokens) << "seed " << seed << " spec '" << spec << "'";
    if (first.empty()) {
      first = a->tokens;
    } else {
      differ_between_seeds += a->tokens != first;
    }
  }
  EXPECT_GT(differ_between_seeds, 0) << "the seeds should give different outputs";
  EXPECT_GE(Metric(*on, "rewind_batches_top_k_total"), static_cast<long long>(seeds.size())) << on->MetricsText();
  EXPECT_EQ(Metric(*off, "rewind_batches_top_k_total"), 0);
  if (!spec.empty()) {
    EXPECT_GT(Metric(*on, "rewind_spec_rounds_total"), 0) << "no verify round ran";
  }
}

TEST(EngineTopK, SeededTopKSamplingGivesTheSameTokensFromPairsAsFromFullRowsOnTheCpu) {
  ExpectSameTokens(-1, "");
}

TEST(EngineTopK, SpeculativeGreedyVerificationFromPairsGivesTheSameTokensOnTheCpu) {
  ExpectSameTokens(-1, "ngram");
}

TEST(EngineTopK, SeededTopKSamplingGivesTheSameTokensFromPairsAsFromFullRowsOnVulkan) {
  auto devs = gpu::ListDevices();
  if (!devs.ok() || devs->empty())
    GTEST_SKIP() << "no Vulkan device: " << (devs.ok() ? "the loader found none" : devs.error().message);
  ExpectSameTokens(0, "", {1, 2});  // lavapipe is slow: fewer seeds
  ExpectSameTokens(0, "ngram", {1, 2});
}

// Greedy needs one pair; logprobs, a top-p-only chain and penalties before top-k need the full row: the
// engine then downloads rows (no top-k batch) and the outputs are those of the engine without top-k.
TEST(EngineTopK, RequestsThatNeedTheFullRowGetItAndGreedyUsesOnePair) {
  auto on = MakeEngine(true, -1);
  auto off = MakeEngine(false, -1);
  ASSERT_TRUE(on && off);
  SamplingParams greedy;
  greedy.temperature = 0;
  EXPECT_EQ(Generate(*on, greedy)->tokens, Generate(*off, greedy)->tokens);

  auto a = Generate(*on, TopK40(9), /*logprobs=*/true);
  auto b = Generate(*off, TopK40(9), /*logprobs=*/true);
  EXPECT_EQ(a->tokens, b->tokens);
  EXPECT_EQ(a->logprobs, b->logprobs);
  // Counters are published after each step: the greedy request's last one is in by now.
  const long long after_greedy = Metric(*on, "rewind_batches_top_k_total");
  EXPECT_GE(after_greedy, 31) << "greedy decode steps ran on full rows";
  SamplingParams top_p = TopK40(9);
  top_p.top_k = 0;
  top_p.top_p = 0.9f;
  EXPECT_EQ(Generate(*on, top_p)->tokens, Generate(*off, top_p)->tokens);
  SamplingParams pen = TopK40(9);
  pen.repeat_penalty = 1.2f;
  EXPECT_EQ(Generate(*on, pen)->tokens, Generate(*off, pen)->tokens);
  Generate(*on, TopK40(10), /*logprobs=*/true, 2);
  EXPECT_EQ(Metric(*on, "rewind_batches_top_k_total"), after_greedy) << "a full-row request ran on pairs";
}

// Two requests decoding together, one on pairs (top-k 40) and one that needs the full row (top-p only): their
// shared batches use full rows, and each request's tokens are those it gets alone without pairs.
TEST(EngineTopK, AMixedBatchGivesEachRequestItsOwnTokens) {
  auto on = MakeEngine(true, -1);
  auto off = MakeEngine(false, -1);
  ASSERT_TRUE(on && off);
  SamplingParams top_p = TopK40(21);
  top_p.top_k = 0;
  top_p.top_p = 0.9f;
  const auto alone_k = Generate(*off, TopK40(20))->tokens;
  const auto alone_p = Generate(*off, top_p)->tokens;
  for (int round = 0; round < 2; ++round) {
    std::vector<std::shared_ptr<Collect>> sinks;
    for (const SamplingParams& s : {TopK40(20), top_p}) {
      GenerationRequest r;
      r.prompt = Prompt();
      r.max_tokens = 32;
      r.sampling = s;
      r.ignore_eos = true;
      sinks.push_back(std::make_shared<Collect>());
      ASSERT_TRUE(on->Submit(r, sinks.back()).ok());
    }
    for (auto& k : sinks) k->Wait();
    EXPECT_EQ(sinks[0]->tokens, alone_k) << "round " << round;
    EXPECT_EQ(sinks[1]->tokens, alone_p) << "round " << round;
  }
}

}  // namespace
}  // namespace rw::engine
