// End-to-end engine tests on the tiny fixture model: greedy output and logprobs are identical with the cache on
// or off, across concurrent requests, and with or without speculative decoding (I1).
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <random>

#include "engine/collect_sink.h"
#include "engine/engine_config.h"
#include "gpu/device.h"

namespace rw::engine {
namespace {

const std::string kModel = std::string(REWIND_TEST_DATA) + "/golden/models/tiny-qwen35-f32.gguf";

using testing::Collect;

std::unique_ptr<Engine> MakeEngine(const std::string& spec, int draft_max, bool cache, int threads = 1,
                                   const std::string& cache_dir = "", int32_t device = -1) {
  EngineConfig c;
  c.device = device;
  c.model_path = kModel;
  c.n_ctx = 1024;
  c.n_parallel = 3;
  c.n_threads = threads;
  c.n_batch = 64;
  c.kv_type = "f32";
  c.cache = cache;
  c.cache_ram_mib = 256;
  c.spec = spec;
  c.draft_max = draft_max;
  c.cache_dir = cache_dir;
  auto e = CreateEngine(c);
  EXPECT_TRUE(e.ok()) << (e.ok() ? "" : e.error().ToString());
  return e.ok() ? std::move(e).value() : nullptr;
}

std::shared_ptr<Collect> Generate(Engine& e, const std::vector<int32_t>& prompt, int n, bool logprobs = true,
                                  std::vector<int32_t> hints = {}) {
  GenerationRequest r;
  r.prompt = prompt;
  r.checkpoint_hints = hints;
  r.max_tokens = n;
  r.sampling.temperature = 0;
  r.logprobs = logprobs;
  r.ignore_eos = true;
  auto sink = std::make_shared<Collect>();
  auto id = e.Submit(r, sink);
  EXPECT_TRUE(id.ok());
  sink->Wait();
  return sink;
}

std::vector<int32_t> Prompt(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> p(n);
  for (auto& t : p) t = static_cast<int32_t>(rng() % 3900);
  return p;
}

TEST(Engine, GreedyOutputIsIdenticalWithAndWithoutCache) {
  auto on = MakeEngine("", 8, true);
  auto off = MakeEngine("", 8, false);
  ASSERT_TRUE(on && off);
  std::vector<int32_t> base = Prompt(150, 1);
  for (int turn = 0; turn < 3; ++turn) {
    std::vector<int32_t> p = base;
    auto extra = Prompt(20 + 7 * turn, 10 + turn);
    p.insert(p.end(), extra.begin(), extra.end());
    // The message boundary at 150 is a checkpoint hint, as the chat renderer's spans make it.
    auto a = Generate(*on, p, 12, true, {150});
    auto b = Generate(*off, p, 12, true, {150});
    EXPECT_EQ(a->tokens, b->tokens) << "turn " << turn;
    EXPECT_EQ(a->logprobs, b->logprobs) << "turn " << turn;
    if (turn > 0) {
      EXPECT_EQ(a->done.cached_tokens, 150) << a->done.cache.reason;
    }
    EXPECT_EQ(b->done.cached_tokens, 0);
  }
}

// The value of one Prometheus line `name V` in a metrics text (-1: absent).
long long MetricValue(const std::string& text, const std::string& name) {
  const size_t at = text.find("\n" + name + " ");
  return at == std::string::npos ? -1 : std::stoll(text.substr(at + name.size() + 2));
}

TEST(Engine, ACheckpointOnDiskIsReadOffTheEngineThreadAndServesTheNoCacheTokens) {
  const std::string dir = ::testing::TempDir() + "/rewind_engine_disk_" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  const std::vector<int32_t> first = Prompt(300, 3);
  {
    auto e = MakeEngine("", 0, true, 1, dir);  // its shutdown writes the conversation's checkpoints to the folder
    ASSERT_TRUE(e);
    Generate(*e, first, 8, true, {150});
  }
  std::vector<int32_t> next = first;
  const std::vector<int32_t> extra = Prompt(30, 4);
  next.insert(next.end(), extra.begin(), extra.end());
  auto restarted = MakeEngine("", 0, true, 1, dir);  // RAM empty: only the disk tier holds the prefix
  auto off = MakeEngine("", 0, false);
  ASSERT_TRUE(restarted && off);
  auto a = Generate(*restarted, next, 12, true, {150, 300});
  auto b = Generate(*off, next, 12, true, {150, 300});
  EXPECT_EQ(a->tokens, b->tokens);
  EXPECT_EQ(a->logprobs, b->logprobs);
  EXPECT_GE(a->done.cached_tokens, 150) << a->done.cache.reason;
  EXPECT_NE(a->done.cache.reason.find("disk tier"), std::string::npos) << a->done.cache.reason;
  const std::string metrics = restarted->MetricsText();
  EXPECT_EQ(MetricValue(metrics, "rewind_cache_disk_loaded_total"), 1) << metrics;
  EXPECT_EQ(MetricValue(metrics, "rewind_cache_disk_reads_on_engine_thread_total"), 0) << metrics;
  EXPECT_NE(metrics.find("rewind_device_info{name=\"cpu\",type=\"cpu\",description=\"cpu\"} 1"), std::string::npos)
      << metrics;
  EXPECT_EQ(metrics.find("rewind_device_memory_used_bytes"), std::string::npos) << "no device memory on the CPU";
  restarted.reset();
  std::filesystem::remove_all(dir);
}

// On the GPU (docs/gpu.md) the KV pages and states live in device memory: the disk tier still writes them out
// (device -> host) and a restarted engine imports them (host -> device) with the bits of a run without cache;
// /metrics and the engine's info report the device memory of pages and states apart from the host checkpoints.
TEST(Engine, OnTheGpuTheDiskTierRoundTripsDevicePagesAndStatesAndMetricsCountThem) {
  auto devs = gpu::ListDevices();
  if (!devs.ok() || devs->empty())
    GTEST_SKIP() << "no Vulkan device: " << (devs.ok() ? "the loader found none" : devs.error().message);
  const std::string dir = ::testing::TempDir() + "/rewind_engine_gpu_disk_" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  const std::vector<int32_t> first = Prompt(200, 7);
  {
    auto e = MakeEngine("", 0, true, 1, dir, 0);
    ASSERT_TRUE(e);
    Generate(*e, first, 6, true, {100});
    const std::string metrics = e->MetricsText();
    EXPECT_GT(MetricValue(metrics, "rewind_device_kv_bytes"), 0) << metrics;
    EXPECT_GT(MetricValue(metrics, "rewind_device_state_bytes"), 0) << metrics;
    EXPECT_GT(MetricValue(metrics, "rewind_cache_checkpoint_bytes"), 0) << metrics;
    EXPECT_GT(e->Info().device_kv_bytes, 0u);
    EXPECT_GT(e->Info().device_state_bytes, 0u);
    EXPECT_GT(e->Info().device_memory_total, 0u);
  }
  std::vector<int32_t> next = first;
  const std::vector<int32_t> extra = Prompt(20, 8);
  next.insert(next.end(), extra.begin(), extra.end());
  auto restarted = MakeEngine("", 0, true, 1, dir, 0);
  auto off = MakeEngine("", 0, false, 1, "", 0);
  ASSERT_TRUE(restarted && off);
  auto a = Generate(*restarted, next, 8, true, {100});
  auto b = Generate(*off, next, 8, true, {100});
  EXPECT_EQ(a->tokens, b->tokens);
  EXPECT_EQ(a->logprobs, b->logprobs);
  EXPECT_GE(a->done.cached_tokens, 100) << a->done.cache.reason;
  EXPECT_NE(a->done.cache.reason.find("disk tier"), std::string::npos) << a->done.cache.reason;
  restarted.reset();
  std::filesystem::remove_all(dir);
}

TEST(Engine, ConcurrentRequestsMatchSequentialOnes) {
  auto e = MakeEngine("", 8, false, 2);
  ASSERT_TRUE(e);
  std::vector<std::vector<int32_t>> prompts = {Prompt(40, 3), Prompt(75, 4), Prompt(9, 5)};
  std::vector<std::shared_ptr<Collect>> solo;
  for (auto& p : prompts) solo.push_back(Generate(*e, p, 10));
  std::vector<std::shared_ptr<Collect>> together;
  for (auto& p : prompts) {
    GenerationRequest r;
    r.prompt = p;
    r.max_tokens = 10;
    r.sampling.temperature = 0;
    r.logprobs = true;
    r.ignore_eos = true;
    together.push_back(std::make_shared<Collect>());
    ASSERT_TRUE(e->Submit(r, together.back()).ok());
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    together[i]->Wait();
    EXPECT_EQ(solo[i]->tokens, together[i]->tokens);
    EXPECT_EQ(solo[i]->logprobs, together[i]->logprobs);
  }
}

// A request pinned to a busy slot (id_slot) waits for that slot; the requests behind it take the free ones.
TEST(Engine, ARequestPinnedToABusySlotDoesNotHoldBackTheQueue) {
  auto e = MakeEngine("", 8, false);
  ASSERT_TRUE(e);
  struct Ordered : Collect {
    explicit Ordered(std::atomic<int>* clock) : clock(clock) {}
    void OnDone(const Completion& c) override {
      order = clock->fetch_add(1);
      Collect::OnDone(c);
    }
    std::atomic<int>* clock;
    int order = -1;
  };
  std::atomic<int> clock{0};
  auto submit = [&](int n, int32_t slot, uint32_t seed) {
    GenerationRequest r;
    r.prompt = Prompt(12, seed);
    r.max_tokens = n;
    r.sampling.temperature = 0;
    r.ignore_eos = true;
    r.slot_id = slot;
    auto sink = std::make_shared<Ordered>(&clock);
    EXPECT_TRUE(e->Submit(r, sink).ok());
    return sink;
  };
  auto a = submit(400, 0, 1);   // holds slot 0 for a long time
  auto b = submit(4, 0, 2);     // pinned to slot 0: waits for a
  auto c = submit(4, -1, 3);    // any slot: must not wait behind b
  a->Wait();
  b->Wait();
  c->Wait();
  EXPECT_EQ(a->done.finish_reason, "length");
  EXPECT_EQ(b->done.slot_id, 0);
  EXPECT_NE(c->done.slot_id, 0);
  EXPECT_LT(c->order, a->order) << "the unpinned request waited for the busy slot";
  EXPECT_GT(b->order, a->order);
}

TEST(Engine, SpeculativeGreedyOutputEqualsPlainOutputForEveryDraftLength) {
  auto plain = MakeEngine("", 8, false);
  ASSERT_TRUE(plain);
  // A repetitive prompt gives the n-gram drafter something to find.
  std::vector<int32_t> p = Prompt(12, 7);
  for (int r = 0; r < 4; ++r) p.insert(p.end(), p.begin(), p.begin() + 12);
  auto ref = Generate(*plain, p, 40);
  int64_t drafted = 0, accepted = 0;
  for (int draft = 1; draft <= 16; ++draft) {
    auto spec = MakeEngine("ngram", draft, false);
    ASSERT_TRUE(spec);
    auto got = Generate(*spec, p, 40);
    EXPECT_EQ(got->tokens, ref->tokens) << "draft " << draft;
    EXPECT_EQ(got->logprobs, ref->logprobs) << "draft " << draft;
    drafted += got->done.drafted;
    accepted += got->done.accepted;
  }
  std::printf("speculative identity: 16 draft lengths, %lld drafted, %lld accepted\n",
              static_cast<long long>(drafted), static_cast<long long>(accepted));
  EXPECT_GT(drafted, 0);
}

TEST(Engine, RejectsInvalidRequests) {
  auto e = MakeEngine("", 8, true);
  ASSERT_TRUE(e);
  GenerationRequest r;
  auto sink = std::make_shared<Collect>();
  EXPECT_FALSE(e->Submit(r, sink).ok());  // empty prompt
  r.prompt = {1, 2, 999999};
  EXPECT_FALSE(e->Submit(r, sink).ok());  // bad token id
  r.prompt = std::vector<int32_t>(2000, 5);
  EXPECT_FALSE(e->Submit(r, sink).ok());  // longer than the context
  r.prompt = {1, 2, 3};
  r.sampling.top_p = 2;
  EXPECT_FALSE(e->Submit(r, sink).ok());
  // The engine still serves a good request afterwards.
  auto ok = Generate(*e, {1, 2, 3}, 3);
  EXPECT_EQ(ok->tokens.size(), 3u);
}

}  // namespace
}  // namespace rw::engine
