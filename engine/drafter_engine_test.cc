// The model-based drafters inside the engine (tiny fixture model): greedy output is the plain output, and the
// target drafting for itself is accepted every time.
#include <gtest/gtest.h>

#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <random>

#include "engine/collect_sink.h"
#include "engine/engine_config.h"

namespace rw::engine {
namespace {

const std::string kModel = std::string(REWIND_TEST_DATA) + "/golden/models/tiny-qwen35-f32.gguf";

using testing::Collect;

std::unique_ptr<Engine> MakeEngine(const std::string& spec, int draft_max, bool cache) {
  EngineConfig c;
  c.model_path = kModel;
  c.model_draft = spec == "draft" ? kModel : "";
  c.n_ctx = 512;
  c.n_parallel = 3;
  c.n_threads = 1;
  c.n_batch = 32;
  c.kv_type = "f32";
  c.cache = cache;
  c.cache_ram_mib = 128;
  c.spec = spec;
  c.draft_max = draft_max;
  auto e = CreateEngine(c);
  EXPECT_TRUE(e.ok()) << (e.ok() ? "" : e.error().ToString());
  return e.ok() ? std::move(e).value() : nullptr;
}

GenerationRequest Request(const std::vector<int32_t>& prompt, int n) {
  GenerationRequest r;
  r.prompt = prompt;
  r.checkpoint_hints = {40};  // a state checkpoint at 40 lets the second request resume the shared prefix
  r.max_tokens = n;
  r.sampling.temperature = 0;
  r.logprobs = true;
  r.ignore_eos = true;
  return r;
}

std::vector<int32_t> Prompt(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> p(n);
  for (auto& t : p) t = static_cast<int32_t>(rng() % 3900);
  return p;
}

// Three requests at once (independent drafter keys), the second sharing a prefix with the first (cache hits).
std::vector<std::shared_ptr<Collect>> RunAll(Engine& e) {
  std::vector<int32_t> a = Prompt(70, 1), b = a, c = Prompt(9, 3);
  b.resize(40);
  auto extra = Prompt(15, 2);
  b.insert(b.end(), extra.begin(), extra.end());
  std::vector<std::shared_ptr<Collect>> out;
  for (const auto& p : {a, b, c}) {
    out.push_back(std::make_shared<Collect>());
    EXPECT_TRUE(e.Submit(Request(p, 24), out.back()).ok());
    if (out.size() == 1) out[0]->Wait();  // b then resumes a's cached prefix (the drafter sees it unobserved)
  }
  for (auto& s : out) s->Wait();
  EXPECT_EQ(out[1]->done.cached_tokens, 40) << out[1]->done.cache.reason;
  return out;
}

TEST(DrafterEngine, ModelDraftersKeepGreedyOutputAndSelfDraftingIsAlwaysAccepted) {
  auto plain = MakeEngine("", 4, true);
  ASSERT_TRUE(plain);
  const auto ref = RunAll(*plain);
  for (const std::string spec : {"mtp", "draft"}) {
    auto e = MakeEngine(spec, 4, true);
    ASSERT_TRUE(e);
    const auto got = RunAll(*e);
    int64_t drafted = 0, accepted = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      EXPECT_EQ(got[i]->tokens, ref[i]->tokens) << spec << " request " << i;
      EXPECT_EQ(got[i]->logprobs, ref[i]->logprobs) << spec << " request " << i;
      drafted += got[i]->done.drafted;
      accepted += got[i]->done.accepted;
    }
    std::printf("--spec %s: %lld drafted, %lld accepted\n", spec.c_str(), static_cast<long long>(drafted),
                static_cast<long long>(accepted));
    EXPECT_GT(drafted, 0) << spec;
    if (spec == "draft") {
      EXPECT_EQ(accepted, drafted);
    }
  }
}

}  // namespace
}  // namespace rw::engine
