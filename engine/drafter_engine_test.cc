// The model-based drafters inside the engine (tiny fixture model): greedy output is the plain output, and the
// target drafting for itself is accepted every time.
#include <gtest/gtest.h>

#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <random>

#include "engine/collect_sink.h"
#include "engine/engine_config.h"
#include "gpu/device.h"

namespace rw::engine {
namespace {

const std::string kModel = std::string(REWIND_TEST_DATA) + "/golden/models/tiny-qwen35-f32.gguf";

using testing::Collect;

const std::string kDraftQ8 = std::string(REWIND_TEST_DATA) + "/golden/models/tiny-qwen35-q8_0.gguf";

// draft_model: the --model-draft file for a spec containing "draft" (default: the target itself).
std::unique_ptr<Engine> MakeEngine(const std::string& spec, int draft_max, bool cache,
                                   const std::string& draft_model = kModel,
                                   const std::string& target = kModel, int32_t device = -1) {
  EngineConfig c;
  c.device = device;
  c.model_path = target;
  c.model_draft = spec.find("draft") != std::string::npos ? draft_model : "";
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

// Every request's greedy tokens and logprobs equal the plain run's; adds up the drafted / accepted counts.
void ExpectPlainOutput(const std::vector<std::shared_ptr<Collect>>& ref,
                       const std::vector<std::shared_ptr<Collect>>& got, const std::string& label,
                       int64_t* drafted, int64_t* accepted) {
  for (size_t i = 0; i < ref.size(); ++i) {
    EXPECT_EQ(got[i]->tokens, ref[i]->tokens) << label << " request " << i;
    EXPECT_EQ(got[i]->logprobs, ref[i]->logprobs) << label << " request " << i;
    *drafted += got[i]->done.drafted;
    *accepted += got[i]->done.accepted;
  }
}

// Greedy tokens and logprobs with speculation equal those without, for every drafter (and a combination) and
// every draft length 1..16. The q8_0 copy of the model as a draft model agrees often but not always, so
// drafts are partly accepted and rolled back; the random MTP head is mostly rejected.
TEST(DrafterEngine, EveryDrafterKeepsGreedyOutputForEveryDraftLength) {
  auto plain = MakeEngine("", 4, true);
  ASSERT_TRUE(plain);
  const auto ref = RunAll(*plain);
  for (const std::string spec : {"mtp", "draft", "mtp,ngram"}) {
    int64_t drafted = 0, accepted = 0, partial = 0;
    for (int draft = 1; draft <= 16; ++draft) {
      auto e = MakeEngine(spec, draft, true, kDraftQ8);
      ASSERT_TRUE(e);
      const auto got = RunAll(*e);
      for (size_t i = 0; i < ref.size(); ++i) {
        EXPECT_EQ(got[i]->tokens, ref[i]->tokens) << spec << " draft " << draft << " request " << i;
        EXPECT_EQ(got[i]->logprobs, ref[i]->logprobs) << spec << " draft " << draft << " request " << i;
        drafted += got[i]->done.drafted;
        accepted += got[i]->done.accepted;
        if (got[i]->done.accepted > 0 && got[i]->done.accepted < got[i]->done.drafted) ++partial;
      }
    }
    std::printf("--spec %s, draft 1..16: %lld drafted, %lld accepted, %lld requests partly accepted\n",
                spec.c_str(), static_cast<long long>(drafted), static_cast<long long>(accepted),
                static_cast<long long>(partial));
    EXPECT_GT(drafted, 0) << spec;
    if (spec == "draft") {
      EXPECT_GT(accepted, 0);
      EXPECT_LT(accepted, drafted);  // rejections happened, so rollbacks were exercised
    }
  }
}

TEST(DrafterEngine, SelfDraftingIsAlwaysAccepted) {
  auto plain = MakeEngine("", 4, true);
  ASSERT_TRUE(plain);
  const auto ref = RunAll(*plain);
  for (int draft : {1, 4, 16}) {
    auto e = MakeEngine("draft", draft, true);
    ASSERT_TRUE(e);
    const auto got = RunAll(*e);
    int64_t drafted = 0, accepted = 0;
    ExpectPlainOutput(ref, got, "draft " + std::to_string(draft), &drafted, &accepted);
    EXPECT_GT(drafted, 0);
    EXPECT_EQ(accepted, drafted) << "draft " << draft;
  }
}

// A hybrid with another recurrent layer kind: n-gram drafts (mostly rejected: rollbacks through its replay log)
// and the model drafting for itself keep the plain greedy tokens and logprobs.
void CheckGreedyOutputWithNgramAndDraftModel(const std::string& fixture) {
  const std::string path = std::string(REWIND_TEST_DATA) + "/golden/models/" + fixture;
  auto plain = MakeEngine("", 4, true, path, path);
  ASSERT_TRUE(plain);
  const auto ref = RunAll(*plain);
  for (const std::string spec : {"ngram", "draft"}) {
    int64_t drafted = 0, accepted = 0;
    for (int draft : {1, 3, 8}) {
      auto e = MakeEngine(spec, draft, true, path, path);
      ASSERT_TRUE(e);
      ExpectPlainOutput(ref, RunAll(*e), spec + " draft " + std::to_string(draft), &drafted, &accepted);
    }
    std::printf("%s --spec %s: %lld drafted, %lld accepted\n", fixture.c_str(), spec.c_str(),
                static_cast<long long>(drafted), static_cast<long long>(accepted));
    EXPECT_GT(drafted, 0) << spec;
  }
}

// Mamba-2 (nemotron_h).
TEST(DrafterEngine, NemotronHKeepsGreedyOutputWithNgramAndDraftModel) {
  CheckGreedyOutputWithNgramAndDraftModel("tiny-nemotron-h-f32.gguf");
}
// LFM2's short convolutions: the replay log holds the B·x rows.
TEST(DrafterEngine, Lfm2KeepsGreedyOutputWithNgramAndDraftModel) {
  CheckGreedyOutputWithNgramAndDraftModel("tiny-lfm2-f32.gguf");
}
// kimi-linear: KDA's per-channel decays in the replay log, MLA's latent rows in the pages.
TEST(DrafterEngine, KimiLinearKeepsGreedyOutputWithNgramAndDraftModel) {
  CheckGreedyOutputWithNgramAndDraftModel("tiny-kimi-linear-f32.gguf");
}

// On the GPU the draft model runs where the target runs (docs/gpu.md): its growing KV, its states and its replay
// log on the device. Greedy tokens and logprobs with speculation are those of the plain run on the device; the
// q8_0 draft is partly accepted (rollbacks on the device).
TEST(DrafterEngine, OnTheGpuTheDraftModelRunsThereAndKeepsGreedyOutput) {
  auto devs = gpu::ListDevices();
  if (!devs.ok() || devs->empty())
    GTEST_SKIP() << "no Vulkan device: " << (devs.ok() ? "the loader found none" : devs.error().message);
  auto plain = MakeEngine("", 4, true, kModel, kModel, 0);
  ASSERT_TRUE(plain);
  const auto ref = RunAll(*plain);
  int64_t drafted = 0, accepted = 0;
  for (int draft : {2, 5}) {
    auto e = MakeEngine("draft", draft, true, kDraftQ8, kModel, 0);
    ASSERT_TRUE(e);
    EXPECT_EQ(e->Info().draft_device.rfind("vulkan0", 0), 0u) << e->Info().draft_device;
    ExpectPlainOutput(ref, RunAll(*e), "vulkan0 draft " + std::to_string(draft), &drafted, &accepted);
  }
  std::printf("vulkan0 --spec draft: %lld drafted, %lld accepted\n", static_cast<long long>(drafted),
              static_cast<long long>(accepted));
  EXPECT_GT(accepted, 0);
  EXPECT_LT(accepted, drafted);
}

}  // namespace
}  // namespace rw::engine
