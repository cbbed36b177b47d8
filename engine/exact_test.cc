// Exactness of the whole memory system on the tiny models (I1-I3; dense qwen35 and the MoE qwen35moe /
// qwen3next): random scripts of operations on several sequences through HybridCache (prefill in random
// chunks, batched decode, rollback by random distances, branches through the prefix tree, checkpoints,
// restores, replays, evictions under a small budget, slot files saved and loaded, 1 or 2 threads), comparing
// EVERY returned logit bit for bit with a straight one-batch prefill of the same tokens. Prints failing seeds
// and totals.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <thread>
#include <unordered_map>

#include "base/check.h"
#include "base/file.h"
#include "base/hash.h"
#include "engine/hybrid_cache.h"
#include "engine/hybrid_cache_impl.h"
#include "gpu/device.h"

namespace rw::engine {

class HybridCacheTestPeer {
 public:
  static HybridCache::Impl& impl(HybridCache& c) { return *c.impl_; }
};

namespace {

using memory::SeqId;

// The llama.cpp fixture models, loaded once each; null (with a test failure) when one cannot be loaded. A name
// with a '/' is a path under tests/data, otherwise the F32 model of golden/models; "vulkan0:NAME" loads it on
// the GPU (docs/gpu.md).
model::Model* LoadFixture(const std::string& name) {
  static std::map<std::string, std::unique_ptr<model::Model>> models;
  auto it = models.find(name);
  if (it == models.end()) {
    const bool gpu = name.rfind("vulkan0:", 0) == 0;
    const std::string file = gpu ? name.substr(8) : name;
    const std::string path = file.find('/') != std::string::npos
                                 ? std::string(REWIND_TEST_DATA) + "/" + file
                                 : std::string(REWIND_TEST_DATA) + "/golden/models/" + file + "-f32.gguf";
    model::LoadOptions lo;
    lo.device = gpu ? 0 : -1;
    auto r = model::Model::Load(path, lo);
    EXPECT_TRUE(r.ok()) << name << ": " << r.error().ToString();
    it = models.emplace(name, r.ok() ? std::move(r).value() : nullptr).first;
  }
  return it->second.get();
}

model::Model& TinyModel() {
  model::Model* m = LoadFixture("tiny-qwen35");
  REWIND_CHECK(m != nullptr);
  return *m;
}

// Straight prefill: the whole token list in one batch from the zero state, all logits. Rows memoized by the
// hash of the prefix they depend on.
class Reference {
 public:
  Reference(model::Model& m, int32_t page_tokens, model::KvTypes type, int32_t max_len) : m_(m) {
    const int32_t n_pages = (max_len + page_tokens - 1) / page_tokens;
    kv_ = std::move(model::KvStorage::Create(m.MakeKvConfig(n_pages, page_tokens, type))).value();
    st_ = std::move(model::StateStorage::Create(m.MakeStateShape(), 1)).value();
    for (int32_t i = 0; i < n_pages; ++i) pages_.push_back(i);
  }

  // Logits after tokens[0..p].
  std::span<const float> Row(const std::vector<int32_t>& tokens, int32_t p) {
    const uint64_t h = HashTokens(std::span<const int32_t>(tokens).first(static_cast<size_t>(p) + 1));
    auto it = rows_.find(h);
    if (it == rows_.end()) {
      model::BatchSeq b;
      b.state_in = -1;
      b.state_out = 0;
      b.pages = pages_;
      b.pos0 = 0;
      b.tokens = tokens;
      b.all_logits = true;
      model::ForwardOutput out;
      Status s = m_.Forward({&b, 1}, *kv_, *st_, &out);
      EXPECT_TRUE(s.ok()) << s.error().ToString();
      ++prefills_;
      uint64_t hh = kFnvOffset;
      for (size_t i = 0; i < tokens.size(); ++i) {
        hh = HashTokens(std::span<const int32_t>(tokens).subspan(i, 1), hh);
        auto row = out.Row(static_cast<int32_t>(i));
        rows_[hh].assign(row.begin(), row.end());
      }
      it = rows_.find(h);
    }
    return it->second;
  }
  int64_t prefills() const { return prefills_; }

 private:
  model::Model& m_;
  std::unique_ptr<model::KvStorage> kv_;
  std::unique_ptr<model::StateStorage> st_;
  std::vector<int32_t> pages_;
  std::unordered_map<uint64_t, std::vector<float>> rows_;
  int64_t prefills_ = 0;
};

struct Totals {
  int64_t scripts = 0, ops = 0, compared_rows = 0, prefills = 0, evictions = 0, restores = 0, replays = 0;
  int64_t fused = 0, materialized = 0;  // lazy rollbacks fused into a forward / applied before another read
  int64_t checkpoints = 0, page_copies = 0;
  std::map<std::string, int64_t> sources;
  std::map<std::string, int64_t> kv_types;  // scripts per KV cache type
};

class Script {
 public:
  static constexpr int32_t kMaxLen = 96;

  Script(model::Model& m, uint64_t seed, Totals* totals) : m_(m), rng_(seed), totals_(totals) {
    m.SetThreads(1 + R(2));
    cfg_.page_tokens = std::vector<int32_t>{4, 8, 16}[R(3)];
    // Every cache type: a quantised row depends on its own token only, so I1 holds for each.
    const model::KvTypes types[] = {model::KvType::kF16,  model::KvType::kF32,  model::KvType::kQ8_0,
                                    model::KvType::kQ4_0, model::KvType::kBF16, model::KvType::kIQ4_NL,
                                    model::KvType::kQ5_1, {model::KvType::kQ8_0, model::KvType::kQ4_1},
                                    {model::KvType::kF16, model::KvType::kQ5_0}};
    cfg_.kv_type = types[R(static_cast<int32_t>(std::size(types)))];
    ++totals_->kv_types[kernels::KvTypesName(cfg_.kv_type)];
    cfg_.n_seq_max = 3;
    cfg_.n_ctx = kMaxLen;
    cfg_.checkpoint_every = std::vector<int32_t>{0, 5, 8, 13}[R(4)];
    cfg_.lazy_rollback = R(4) != 0;  // mostly lazy (the default), sometimes every rollback replayed at once
    const int64_t state = static_cast<int64_t>(m.MakeStateShape().bytes_per_state());
    const int64_t page =
        static_cast<int64_t>(m.config().KvBytesPerToken(cfg_.kv_type)) *
        cfg_.page_tokens;
    cfg_.budget_bytes = state * (4 + R(6)) + page * (2 * kMaxLen / cfg_.page_tokens + R(24));
    // On a GPU the pages are a device pool apart from the budget (docs/cache-budget.md): about as tight as the
    // budget's share for pages (its bytes beyond four checkpoints; no further draw, so the scripts stay the same).
    if (m.device_name() != "cpu") cfg_.device_bytes = cfg_.budget_bytes - 4 * state;
    auto c = HybridCache::Create(m, cfg_);
    EXPECT_TRUE(c.ok()) << c.error().ToString();
    cache_ = std::move(c).value();
    ref_ = std::make_unique<Reference>(m, cfg_.page_tokens, cfg_.kv_type, kMaxLen);
    dir_ = ::testing::TempDir() + "/rewind_exact_" + std::to_string(getpid());
  }

  int32_t R(int32_t n) { return static_cast<int32_t>(rng_() % static_cast<uint64_t>(n)); }

  struct Live {
    SeqId seq = memory::kNone;
    std::vector<int32_t> tokens;  // evaluated
    std::vector<int32_t> prompt;  // what remains to prefill is prompt[tokens.size():]
  };

  void Check() {
    HybridCacheTestPeer::impl(*cache_).mm->CheckInvariants();
    for (const Live& l : live_) ASSERT_EQ(cache_->Position(l.seq), static_cast<int32_t>(l.tokens.size()));
    ++totals_->ops;
  }

  // Evaluates items (live index, tokens) in one batch and compares every returned row.
  void Eval(const std::vector<std::pair<size_t, std::vector<int32_t>>>& work) {
    std::vector<EvalItem> items;
    std::vector<bool> all;
    for (const auto& [i, toks] : work) {
      bool a = R(2) == 0;
      items.push_back({live_[i].seq, toks, a});
      all.push_back(a);
    }
    model::ForwardOutput out;
    Status s = cache_->Evaluate(items, &out);
    if (!s.ok()) {
      ASSERT_EQ(s.error().kind, ErrorKind::kResourceExhausted) << s.error().ToString();
      Check();
      return;  // failed cleanly: nothing changed
    }
    for (size_t k = 0; k < work.size(); ++k) {
      Live& l = live_[work[k].first];
      const int32_t pos0 = static_cast<int32_t>(l.tokens.size());
      l.tokens.insert(l.tokens.end(), work[k].second.begin(), work[k].second.end());
      const int32_t n = static_cast<int32_t>(work[k].second.size());
      const int32_t first = all[k] ? 0 : n - 1;
      for (int32_t j = first; j < n; ++j) {
        auto got = out.Row(out.seq_first_row[k] + (j - first));
        auto want = ref_->Row(l.tokens, pos0 + j);
        ASSERT_EQ(got.size(), want.size());
        ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size_bytes()), 0)
            << "logits differ at position " << pos0 + j << " (batch of " << work.size() << ")";
        ++totals_->compared_rows;
      }
    }
    Check();
  }

  std::vector<int32_t> RandomPrompt() {
    std::vector<int32_t> p;
    if (!known_.empty() && R(4) != 0) {
      const int32_t recent = std::min<int32_t>(4, static_cast<int32_t>(known_.size()));
      p = known_[known_.size() - 1 - static_cast<size_t>(R(recent))];  // mostly recent conversations
      if (R(2)) p.resize(static_cast<size_t>(R(static_cast<int32_t>(p.size()) + 1)));  // else: the next turn
    }
    int32_t extra = 1 + R(14);
    for (int32_t i = 0; i < extra && static_cast<int32_t>(p.size()) < kMaxLen - 20; ++i)
      p.push_back(1 + R(5));
    return p;
  }

  void NewRequest() {
    std::vector<int32_t> prompt = RandomPrompt();
    std::vector<int32_t> hints;
    for (int32_t i = 0; i < 4; ++i)
      if (R(2)) hints.push_back(R(static_cast<int32_t>(prompt.size())));
    std::sort(hints.begin(), hints.end());
    hints.erase(std::unique(hints.begin(), hints.end()), hints.end());
    auto a = cache_->Acquire(prompt, hints, R(8) != 0);
    if (!a.ok()) {
      ASSERT_EQ(a.error().kind, ErrorKind::kResourceExhausted) << a.error().ToString();
      return;
    }
    ASSERT_LT(a->resume_pos, static_cast<int32_t>(prompt.size()));
    ASSERT_LE(a->resume_pos, a->report.lcp);
    totals_->sources[a->report.source]++;
    Live l;
    l.seq = a->seq;
    l.tokens.assign(prompt.begin(), prompt.begin() + a->resume_pos);
    l.prompt = prompt;
    live_.push_back(l);
    known_.push_back(prompt);
    Check();
  }

  // One step of prefill for sequence i (bounded by MaxChunk), maybe batched with decode steps of others.
  void Step() {
    std::vector<std::pair<size_t, std::vector<int32_t>>> work;
    for (size_t i = 0; i < live_.size(); ++i) {
      Live& l = live_[i];
      if (R(3) == 0) continue;
      if (l.tokens.size() < l.prompt.size()) {
        int32_t left = static_cast<int32_t>(l.prompt.size() - l.tokens.size());
        int32_t n = cache_->MaxChunk(l.seq, 1 + R(std::min(left, 12)));
        n = std::min(n, left);
        work.push_back({i, std::vector<int32_t>(l.prompt.begin() + l.tokens.size(),
                                                l.prompt.begin() + l.tokens.size() + n)});
      } else if (static_cast<int32_t>(l.tokens.size()) < kMaxLen - 4) {
        work.push_back({i, {1 + R(5)}});  // decode
      }
    }
    if (!work.empty()) Eval(work);
  }

  void Rollback() {
    if (live_.empty()) return;
    Live& l = live_[R(static_cast<int32_t>(live_.size()))];
    const int32_t pos = static_cast<int32_t>(l.tokens.size());
    int32_t n = R(3) == 0 ? R(pos + 1) : pos - R(std::min(pos, 6) + 1);
    auto t = cache_->Truncate(l.seq, n);
    ASSERT_TRUE(t.ok()) << t.error().ToString();
    ASSERT_LE(t->resume_pos, n);
    totals_->sources["truncate:" + t->source]++;
    ASSERT_EQ(t->refeed, std::vector<int32_t>(l.tokens.begin() + t->resume_pos, l.tokens.begin() + n));
    l.tokens.resize(static_cast<size_t>(t->resume_pos));
    l.prompt.assign(l.tokens.begin(), l.tokens.end());
    l.prompt.insert(l.prompt.end(), t->refeed.begin(), t->refeed.end());
    if (R(2)) l.prompt.push_back(1 + R(5));  // then diverge
    Check();
    const size_t idx = static_cast<size_t>(&l - live_.data());
    if (!t->refeed.empty()) Eval({{idx, t->refeed}});
  }

  void Release() {
    if (live_.empty()) return;
    size_t i = static_cast<size_t>(R(static_cast<int32_t>(live_.size())));
    if (R(6) == 0 && !live_[i].tokens.empty()) {  // slot file round trip through the tree
      const std::string path = dir_ + "/slot.bin";
      ASSERT_TRUE(MakeDirs(dir_).ok());
      auto saved = cache_->SaveSequence(live_[i].seq, path);
      ASSERT_TRUE(saved.ok()) << saved.error().ToString();
      cache_->Release(live_[i].seq, false);
      auto loaded = cache_->LoadIntoTree(path);
      if (!loaded.ok()) {
        ASSERT_EQ(loaded.error().kind, ErrorKind::kResourceExhausted) << loaded.error().ToString();
      }
      totals_->sources["slot-file"]++;
    } else {
      cache_->Release(live_[i].seq, R(4) != 0);
    }
    known_.push_back(live_[i].tokens);
    live_.erase(live_.begin() + static_cast<std::ptrdiff_t>(i));
    Check();
  }

  void Run(int n_ops) {
    for (int k = 0; k < n_ops && !::testing::Test::HasFatalFailure() && !::testing::Test::HasFailure(); ++k) {
      int op = R(10);
      if (live_.size() < static_cast<size_t>(cfg_.n_seq_max) && (live_.empty() || op == 0)) {
        NewRequest();
      } else if (op <= 5) {
        Step();
      } else if (op <= 7) {
        Rollback();
      } else if (op == 8) {
        Release();
      } else {
        m_.SetThreads(1 + R(2));
        Step();
      }
    }
    while (!live_.empty() && !::testing::Test::HasFailure()) Release();
    if (::testing::Test::HasFailure()) return;
    auto& im = HybridCacheTestPeer::impl(*cache_);
    totals_->evictions += static_cast<int64_t>(im.counters.evictions);
    totals_->restores += static_cast<int64_t>(im.counters.restores);
    totals_->replays += static_cast<int64_t>(im.counters.replays);
    totals_->fused += static_cast<int64_t>(im.counters.fused_replays);
    totals_->materialized += static_cast<int64_t>(im.counters.materialized);
    totals_->checkpoints += static_cast<int64_t>(im.counters.checkpoints_saved);
    totals_->page_copies += static_cast<int64_t>(im.counters.page_copies);
    auto all = im.mm->PlanEvictAll();
    ASSERT_TRUE(all.ok());
    im.mm->Commit(*all);
    im.Exec(all->ops);
    im.mm->CheckInvariants();
    EXPECT_EQ(im.mm->pages().free_count(), im.mm->pages().capacity());
    EXPECT_EQ(im.mm->slots().free_count(), im.mm->slots().capacity());
    EXPECT_TRUE(im.ckpts.empty());
    EXPECT_EQ(im.mm->used_bytes(), 0);
    totals_->prefills += ref_->prefills();
  }

 private:
  model::Model& m_;
  std::mt19937_64 rng_;
  Totals* totals_;
  HybridCacheConfig cfg_;
  std::unique_ptr<HybridCache> cache_;
  std::unique_ptr<Reference> ref_;
  std::string dir_;
  std::vector<Live> live_;
  std::vector<std::vector<int32_t>> known_;
};

// Runs `n` scripts with seeds base, base + 1, ... (base: REWIND_EXACT_SEED or `default_base`) on the fixture
// model `name`, prints the totals and checks that the scripts reached every storage path (evictions only when
// `expect_evictions`: the MoE runs are shorter and see a few evictions per 100 scripts, too few to require;
// lazy rollbacks only when `expect_lazy`: the GPU run is a few scripts).
void RunScripts(const std::string& name, int n, uint64_t default_base, bool expect_evictions,
                bool expect_lazy = true) {
  model::Model* m = LoadFixture(name);
  ASSERT_NE(m, nullptr);
  Totals totals;
  uint64_t base = default_base;
  if (const char* s = std::getenv("REWIND_EXACT_SEED")) base = std::strtoull(s, nullptr, 10);
  for (int i = 0; i < n; ++i) {
    const uint64_t seed = base + static_cast<uint64_t>(i);
    {
      Script script(*m, seed, &totals);
      script.Run(24);
    }
    ++totals.scripts;
    ASSERT_FALSE(::testing::Test::HasFailure())
        << name << ": failing script: seed " << seed << " (rerun with REWIND_EXACT_SEED=" << seed << ")";
  }
  std::printf(
      "exact %s: %lld scripts, %lld checked operations, %lld logit rows compared bitwise, %lld reference "
      "prefills\n",
      name.c_str(), static_cast<long long>(totals.scripts), static_cast<long long>(totals.ops),
      static_cast<long long>(totals.compared_rows), static_cast<long long>(totals.prefills));
  for (const auto& [k, v] : totals.sources) std::printf("  %s: %lld\n", k.c_str(), static_cast<long long>(v));
  std::string kv;
  for (const auto& [k, v] : totals.kv_types) kv += " " + k + " x" + std::to_string(v);
  std::printf("  KV cache types:%s\n", kv.c_str());
  std::printf(
      "  storage: %lld checkpoints saved, %lld restores, %lld replays, %lld page copies, %lld evictions\n",
      static_cast<long long>(totals.checkpoints), static_cast<long long>(totals.restores),
      static_cast<long long>(totals.replays), static_cast<long long>(totals.page_copies),
      static_cast<long long>(totals.evictions));
  std::printf("  lazy rollbacks: %lld fused into the next forward, %lld materialised before another read\n",
              static_cast<long long>(totals.fused), static_cast<long long>(totals.materialized));
  if (expect_lazy) {
    EXPECT_GT(totals.fused, 0);
    EXPECT_GT(totals.materialized, 0);
  }
  if (expect_evictions) {
    EXPECT_GT(totals.evictions, 0);
  }
  EXPECT_GT(totals.replays, 0);
  EXPECT_GT(totals.restores, 0);
  EXPECT_GT(totals.page_copies, 0);
}

TEST(Exact, RandomScriptsMatchAStraightPrefillBitForBit) { RunScripts("tiny-qwen35", 200, 7000, true); }

// The same property with the forward, the replay log and rollbacks on the GPU (lavapipe in CI: few scripts, so
// fused rollbacks are covered by model/golden_gpu_test.cc's ReplayLogRollbackGivesTheForwardsBits instead).
TEST(Exact, RandomScriptsOnTheGpuMatchAStraightPrefillBitForBit) {
  auto devs = gpu::ListDevices();
  if (!devs.ok() || devs->empty())
    GTEST_SKIP() << "no Vulkan device: " << (devs.ok() ? "the loader found none" : devs.error().message);
  RunScripts("vulkan0:golden/models/tiny-qwen35-q8_0.gguf", 6, 7000, false, false);
}

// The same on the GPU with the MoE (device router, expert-indexed matmuls, combine). (qwen3next's fused
// projections: model/golden_gpu_test.cc checks its batch shapes and its legacy ssm_in bit for bit.)
TEST(Exact, RandomScriptsOnTheGpuWithMoeMatchAStraightPrefillBitForBit) {
  auto devs = gpu::ListDevices();
  if (!devs.ok() || devs->empty())
    GTEST_SKIP() << "no Vulkan device: " << (devs.ok() ? "the loader found none" : devs.error().message);
  RunScripts("vulkan0:golden/models/tiny-qwen35moe-f32.gguf", 3, 1000, false, false);
}

// The same on the MoE architectures: expert routing must not depend on how tokens are batched or replayed.
TEST(Exact, RandomScriptsOnQwen35MoeMatchAStraightPrefillBitForBit) {
  RunScripts("tiny-qwen35moe", 100, 17000, false);
}
TEST(Exact, RandomScriptsOnQwen3NextMatchAStraightPrefillBitForBit) {
  RunScripts("tiny-qwen3next", 100, 27000, false);
}
// Every low-bit weight type (and Q8_0, BF16, F16) in one llama.cpp-quantised file (tests/data/golden_lowbit).
TEST(Exact, RandomScriptsOnAMixedLowbitModelMatchAStraightPrefillBitForBit) {
  RunScripts("golden_lowbit/models/tiny-qwen35-mix.gguf", 40, 37000, false);
}
// Mamba-2 hybrid (nemotron_h): the same memory system over another recurrent layer kind.
TEST(Exact, RandomScriptsOnNemotronHMatchAStraightPrefillBitForBit) {
  RunScripts("tiny-nemotron-h", 100, 37000, false);
}
TEST(Exact, RandomScriptsOnNemotronHMoeMatchAStraightPrefillBitForBit) {
  RunScripts("tiny-nemotron-h-moe", 40, 57000, false);
}
TEST(Exact, RandomScriptsOnGraniteHybridMatchAStraightPrefillBitForBit) {
  RunScripts("tiny-granite-h", 60, 47000, false);
}
// LFM2: the short-conv layers' state is a conv window only (a third recurrent layer kind).
TEST(Exact, RandomScriptsOnLfm2MatchAStraightPrefillBitForBit) { RunScripts("tiny-lfm2", 60, 77000, false); }
TEST(Exact, RandomScriptsOnLfm2MoeMatchAStraightPrefillBitForBit) { RunScripts("tiny-lfm2-moe", 40, 87000, false); }
TEST(Exact, RandomScriptsOnKimiLinearMatchAStraightPrefillBitForBit) {
  RunScripts("tiny-kimi-linear", 40, 97000, false);
}
TEST(Exact, RandomScriptsOnGraniteHybridMoeMatchAStraightPrefillBitForBit) {
  RunScripts("tiny-granite-h-moe", 40, 67000, false);
}

HybridCacheConfig SmallConfig(const std::string& dir = "") {
  HybridCacheConfig c;
  c.page_tokens = 8;
  c.kv_type = model::KvType::kF16;
  c.n_seq_max = 2;
  c.n_ctx = 64;
  c.checkpoint_every = 0;
  c.budget_bytes = 64 << 20;
  c.disk_dir = dir;
  c.disk_min_saved_tokens = 1;  // every checkpoint goes to disk, however short its prefix
  return c;
}

// Prefills `prompt` from the cache's resume point, returns the last row and the acquire report.
// The disk tier is read on another thread first, as the engine does on the request's thread.
std::vector<float> Prefill(HybridCache& cache, const std::vector<int32_t>& prompt, AcquireResult* acq_out) {
  std::shared_ptr<const DiskFetch> disk;
  std::thread reader([&] { disk = cache.FetchDisk(prompt, [&] { return cache.RamResume(prompt); }); });
  reader.join();
  auto acq = cache.Acquire(prompt, {}, true, 0, nullptr, disk.get());
  EXPECT_TRUE(acq.ok()) << acq.error().ToString();
  *acq_out = *acq;
  std::span<const int32_t> rest(prompt.data() + acq->resume_pos, prompt.size() - acq->resume_pos);
  EvalItem item{acq->seq, rest, false};
  model::ForwardOutput out;
  Status s = cache.Evaluate({&item, 1}, &out);
  EXPECT_TRUE(s.ok()) << s.error().ToString();
  auto row = out.Row(0);
  return {row.begin(), row.end()};
}

TEST(Exact, PersistedCheckpointsSurviveARestartBitForBit) {
  model::Model& m = TinyModel();
  m.SetThreads(1);
  const std::string dir = ::testing::TempDir() + "/rewind_persist_" + std::to_string(getpid());
  std::vector<int32_t> turn1 = {5, 9, 2, 7, 7, 1, 3, 8, 4, 4, 2, 6, 9, 1};
  std::vector<int32_t> turn2 = turn1;
  for (int32_t t : {3, 3, 5, 1}) turn2.push_back(t);
  {
    auto c = HybridCache::Create(m, SmallConfig(dir));
    ASSERT_TRUE(c.ok());
    AcquireResult a;
    Prefill(**c, turn1, &a);
    (*c)->Release(a.seq, true);
    ASSERT_TRUE((*c)->Persist().ok());
  }
  Reference ref(m, 8, model::KvType::kF16, 64);
  auto c = HybridCache::Create(m, SmallConfig(dir));
  ASSERT_TRUE(c.ok());
  AcquireResult a;
  std::vector<float> got = Prefill(**c, turn2, &a);
  EXPECT_EQ(a.resume_pos, static_cast<int32_t>(turn1.size()));
  EXPECT_EQ(a.report.source, "checkpoint");
  auto want = ref.Row(turn2, static_cast<int32_t>(turn2.size()) - 1);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size_bytes()), 0);
  (*c)->Release(a.seq, false);

  // A corrupted file is rejected as a whole: the next start resumes from nothing, with the reason reported.
  c->reset();
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file() || e.path().filename() == "index") continue;  // every page and state
    auto bytes = ReadFileToString(e.path().string());
    ASSERT_TRUE(bytes.ok());
    (*bytes)[bytes->size() - 3] ^= 0x10;
    ASSERT_TRUE(WriteFileAtomic(e.path().string(), *bytes).ok());
  }
  auto c2 = HybridCache::Create(m, SmallConfig(dir));
  ASSERT_TRUE(c2.ok());
  AcquireResult b;
  Prefill(**c2, turn2, &b);
  EXPECT_EQ(b.resume_pos, 0);
  EXPECT_EQ(b.report.reason, "no shared prefix");
  (*c2)->Release(b.seq, false);
  c2->reset();  // its background writer and store threads stop before the folder goes
  std::filesystem::remove_all(dir);
}

TEST(Exact, BadBatchesFailCleanly) {
  model::Model& m = TinyModel();
  auto c = HybridCache::Create(m, SmallConfig());
  ASSERT_TRUE(c.ok());
  HybridCache& cache = **c;
  auto a = cache.Acquire(std::vector<int32_t>{1, 2, 3}, {}, true);
  ASSERT_TRUE(a.ok());
  std::vector<int32_t> bad = {1, m.config().n_vocab};
  EvalItem item{a->seq, bad, false};
  model::ForwardOutput out;
  Status s = cache.Evaluate({&item, 1}, &out);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().kind, ErrorKind::kInvalidArgument);
  EXPECT_EQ(cache.Position(a->seq), 0);
  std::vector<int32_t> too_long(65, 1);
  item.tokens = too_long;
  EXPECT_EQ(cache.Evaluate({&item, 1}, &out).error().kind, ErrorKind::kOutOfRange);
  EvalItem twice[2] = {{a->seq, std::span<const int32_t>(bad).first(1), false},
                       {a->seq, std::span<const int32_t>(bad).first(1), false}};
  EXPECT_FALSE(cache.Evaluate(twice, &out).ok());
  EXPECT_FALSE(cache.Truncate(a->seq, 1).ok());
  EXPECT_FALSE(cache.Acquire(std::vector<int32_t>{}, {}, true).ok());
  EXPECT_FALSE(cache.LoadIntoTree("/nonexistent/file").ok());
  HybridCacheTestPeer::impl(cache).mm->CheckInvariants();
  EXPECT_EQ(cache.Position(a->seq), 0);
  cache.Release(a->seq, true);
}

}  // namespace
}  // namespace rw::engine
