// The cache under memory pressure, on the tiny fixture model: with a budget smaller than the working set of
// concurrent requests, requests wait for memory (admission control, docs/cache-budget.md), the budget is never
// exceeded and every answer equals --no-cache's; a prefix evicted to the disk tier is served from disk at the
// minimum cost, a corrupt file being skipped.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <random>
#include <thread>

#include "base/file.h"
#include "engine/collect_sink.h"
#include "engine/tiny_fixture.h"
#include "engine/engine_config.h"
#include "engine/hybrid_cache.h"
#include "engine/hybrid_cache_impl.h"

namespace rw::engine {

class HybridCacheTestPeer {
 public:
  static HybridCache::Impl& impl(HybridCache& c) { return *c.impl_; }
};

namespace {

const std::string& kModel = testing::kTinyModel;
constexpr auto Prompt = testing::RandomPrompt;

std::vector<int32_t> Concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

model::Model& TinyModel() {
  static std::unique_ptr<model::Model> m = [] {
    auto r = model::Model::Load(kModel);
    EXPECT_TRUE(r.ok()) << r.error().ToString();
    return r.ok() ? std::move(r).value() : nullptr;
  }();
  if (!m) std::abort();
  m->SetThreads(1);
  return *m;
}

int64_t StateBytes(model::Model& m) { return static_cast<int64_t>(m.MakeStateShape().bytes_per_state()); }
int64_t PageBytes(model::Model& m, int32_t page_tokens, model::KvTypes types) {
  return static_cast<int64_t>(m.config().KvBytesPerToken(types)) * page_tokens;
}

// ---- Budget (engine level) -------------------------------------------------------------------------------

std::unique_ptr<Engine> MakeEngine(bool cache, int64_t cache_ram_mib) {
  EngineConfig c;
  c.model_path = kModel;
  c.n_ctx = 4096;
  c.n_parallel = 2;
  c.n_threads = 1;
  c.n_batch = 128;
  c.kv_type = "f32";
  c.cache = cache;
  c.cache_ram_mib = cache_ram_mib;
  auto e = CreateEngine(c);
  EXPECT_TRUE(e.ok()) << (e.ok() ? "" : e.error().ToString());
  return e.ok() ? std::move(e).value() : nullptr;
}

GenerationRequest Greedy(const std::vector<int32_t>& prompt, int n) {
  GenerationRequest r;
  r.prompt = prompt;
  r.max_tokens = n;
  r.sampling.temperature = 0;
  r.logprobs = true;
  r.ignore_eos = true;
  return r;
}

int64_t JsonInt(const std::string& json, const std::string& key) {
  const size_t at = json.find("\"" + key + "\":");
  EXPECT_NE(at, std::string::npos) << key << " in " << json;
  return at == std::string::npos ? -1 : std::stoll(json.substr(at + key.size() + 3));
}

TEST(CacheBudget, RequestsWaitForMemoryAndAnswerExactlyLikeNoCache) {
  // 4 MiB holds 64 pages of 32 F32 tokens (64 KiB each): one request of ~1500 tokens (49 pages reserved),
  // never two at once. Admission control makes the second of each pair wait; nothing exceeds the budget.
  model::Model& m = TinyModel();
  const int64_t page = PageBytes(m, 32, model::KvType::kF32);
  ASSERT_EQ(page, 64 << 10) << "the fixture's page size changed: adjust the budget";
  auto tiny = MakeEngine(true, 4);
  auto off = MakeEngine(false, 0);
  ASSERT_TRUE(tiny && off);
  EXPECT_EQ(tiny->Info().n_ctx, 63 * 32) << "the budget limits one request's length (one page for copy-on-write)";
  const std::vector<int32_t> system = Prompt(900, 1);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 3; ++i) prompts.push_back(Concat(system, Prompt(300 + 150 * i, 10 + i)));
  prompts.push_back(Concat(prompts[0], Prompt(40, 20)));  // next turn of the first conversation
  prompts.push_back(Prompt(1500, 21));                     // unrelated, long
  std::vector<std::shared_ptr<testing::Collect>> got(prompts.size()), want(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    want[i] = std::make_shared<testing::Collect>();
    ASSERT_TRUE(off->Submit(Greedy(prompts[i], 8), want[i]).ok());
    want[i]->Wait();
  }
  // Pairs are submitted together; both working sets do not fit at once.
  for (size_t i = 0; i < prompts.size(); i += 2) {
    for (size_t j = i; j < std::min(i + 2, prompts.size()); ++j) {
      got[j] = std::make_shared<testing::Collect>();
      ASSERT_TRUE(tiny->Submit(Greedy(prompts[j], 8), got[j]).ok());
    }
    for (size_t j = i; j < std::min(i + 2, prompts.size()); ++j) got[j]->Wait();
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_FALSE(got[i]->done.error.has_value()) << "request " << i << ": " << got[i]->done.error->ToString();
    EXPECT_EQ(got[i]->done.finish_reason, "length") << "request " << i;
    EXPECT_EQ(got[i]->tokens, want[i]->tokens) << "request " << i;
    EXPECT_EQ(got[i]->logprobs, want[i]->logprobs) << "request " << i;
  }
  const std::string metrics = tiny->MetricsText();
  // Each pair's second request waited (both are queued within microseconds, a prefill takes milliseconds).
  const size_t at = metrics.find("\nrewind_admission_waits_total ");
  ASSERT_NE(at, std::string::npos) << metrics;
  EXPECT_GE(std::stoll(metrics.substr(at + 30)), 1) << metrics;
  const std::string stats = tiny->CacheJson();
  EXPECT_LE(JsonInt(stats, "used_bytes"), JsonInt(stats, "budget_bytes")) << "the cache kept more than the budget";
  EXPECT_EQ(JsonInt(stats, "reserved_bytes"), 0);
  EXPECT_EQ(JsonInt(stats, "sequences"), 0);
  // A request longer than the budget can ever hold is refused at once, with the reason.
  auto too_long = tiny->Submit(Greedy(Prompt(2100, 30), 8), std::make_shared<testing::Collect>());
  ASSERT_FALSE(too_long.ok());
  EXPECT_EQ(too_long.error().kind, ErrorKind::kOutOfRange);
}

TEST(CacheBudget, StartRefusesABudgetBelowOneCheckpointAndTwoPages) {
  model::Model& m = TinyModel();
  HybridCacheConfig c;
  c.kv_type = model::KvType::kF32;
  c.n_ctx = 256;
  c.budget_bytes = StateBytes(m);
  auto r = HybridCache::Create(m, c);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ErrorKind::kInvalidArgument);
  EXPECT_NE(r.error().message.find("--cache-ram"), std::string::npos) << r.error().message;
  c.budget_bytes = StateBytes(m) + PageBytes(m, c.page_tokens, model::KvType::kF32);
  EXPECT_FALSE(HybridCache::Create(m, c).ok());
  c.budget_bytes = StateBytes(m) + 2 * PageBytes(m, c.page_tokens, model::KvType::kF32);
  EXPECT_TRUE(HybridCache::Create(m, c).ok());
  c.budget_bytes = 1;
  c.use_cache = false;  // --no-cache needs no budget
  EXPECT_TRUE(HybridCache::Create(m, c).ok());
}

// ---- KV memory (model/kv_storage.h): reserved, committed on use, handed back when free ---------------------

TEST(KvMemory, DiscardZeroesTheGivenPagesAndKeepsTheirNeighbours) {
  // 2 layers, 4 KiB per layer-page (32 rows x 32 floats): page boundaries are OS page boundaries.
  auto kv = std::move(model::KvStorage::Create({2, 32, 32, 64, model::KvType::kF32})).value();
  const size_t page = 32 * 32 * 4;
  for (int32_t l = 0; l < 2; ++l)
    for (int32_t p = 0; p < 8; ++p) {
      std::memset(kv->K(l, p), 0x40 + p, page);
      std::memset(kv->V(l, p), 0x60 + p, page);
    }
  kv->Discard(2, 3);  // pages 2, 3, 4
  for (int32_t l = 0; l < 2; ++l)
    for (int32_t p = 0; p < 8; ++p) {
      const bool gone = p >= 2 && p < 5;
      EXPECT_EQ(kv->K(l, p)[0], gone ? 0 : 0x40 + p) << l << " " << p;
      EXPECT_EQ(kv->K(l, p)[page - 1], gone ? 0 : 0x40 + p) << l << " " << p;
      EXPECT_EQ(kv->V(l, p)[page / 2], gone ? 0 : 0x60 + p) << l << " " << p;
    }
}

int64_t ResidentBytes() {
  auto statm = ReadFileToString("/proc/self/statm");
  if (!statm.ok()) return -1;
  const size_t sp = statm->find(' ');
  return std::stoll(statm->substr(sp + 1)) * sysconf(_SC_PAGESIZE);
}

TEST(KvMemory, ResidentMemoryFollowsThePagesWrittenNotThePoolSize) {
  // A 2 GiB pool (1024 pages of 1 MiB): creating it commits nothing; writing 64 pages commits 64 MiB, handing
  // them back returns it.
  const int64_t before = ResidentBytes();
  auto kv = std::move(model::KvStorage::Create({8, 1024, 32, 1024, model::KvType::kF32})).value();
  ASSERT_EQ(kv->total_bytes(), uint64_t{2} << 30);
  const int64_t created = ResidentBytes();
  EXPECT_LT(created - before, 8 << 20);
  EXPECT_EQ(kv->K(7, 1023)[0], 0);
  for (int32_t l = 0; l < 8; ++l)
    for (int32_t p = 0; p < 64; ++p) {
      std::memset(kv->K(l, p), 1, 32 * 1024 * 4);
      std::memset(kv->V(l, p), 1, 32 * 1024 * 4);
    }
  const int64_t written = ResidentBytes();
  EXPECT_GE(written - created, 60 << 20);
  kv->Discard(0, 64);
  EXPECT_LE(ResidentBytes(), written - (60 << 20));
}

// ---- Disk tier (HybridCache level) -----------------------------------------------------------------------

class DiskTier : public ::testing::Test {
 protected:
  static constexpr int32_t kPage = 16;
  static constexpr int32_t kLen = 160;  // the conversation that gets evicted

  void SetUp() override {
    dir_ = ::testing::TempDir() + "/rewind_tier_" + std::to_string(getpid());
    std::filesystem::remove_all(dir_);
    model::Model& m = TinyModel();
    // Room for A (kLen tokens: two checkpoints and their pages, +2 pages of slack), far less than B needs.
    cfg_.page_tokens = kPage;
    cfg_.kv_type = model::KvType::kF32;
    cfg_.n_seq_max = 2;
    cfg_.n_ctx = 1024;
    cfg_.checkpoint_every = 0;
    cfg_.budget_bytes = 2 * StateBytes(m) + PageBytes(m, kPage, model::KvType::kF32) * (kLen / kPage + 2);
    cfg_.disk_dir = dir_;
    auto c = HybridCache::Create(m, cfg_);
    ASSERT_TRUE(c.ok()) << c.error().ToString();
    cache_ = std::move(c).value();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Prefills `prompt` (chunks end at the planned checkpoints) and returns the last row's logits.
  std::vector<float> Run(HybridCache& cache, const std::vector<int32_t>& prompt, std::vector<int32_t> hints,
                         AcquireResult* acq_out, bool release = true) {
    // The disk tier is read off the "engine" thread (this one), as the engine does on the request's thread.
    std::shared_ptr<const DiskFetch> disk;
    std::thread reader([&] { disk = cache.FetchDisk(prompt, [&] { return cache.RamResume(prompt); }); });
    reader.join();
    auto acq = cache.Acquire(prompt, hints, true, 0, nullptr, disk.get());
    EXPECT_TRUE(acq.ok()) << acq.error().ToString();
    if (!acq.ok()) return {};
    *acq_out = *acq;
    std::vector<float> last;
    int32_t pos = acq->resume_pos;
    while (pos < static_cast<int32_t>(prompt.size())) {
      const int32_t n = cache.MaxChunk(acq->seq, static_cast<int32_t>(prompt.size()) - pos);
      EvalItem item{acq->seq, std::span<const int32_t>(prompt).subspan(static_cast<size_t>(pos), n), false};
      model::ForwardOutput out;
      Status s = cache.Evaluate({&item, 1}, &out);
      EXPECT_TRUE(s.ok()) << s.error().ToString();
      if (!s.ok()) return {};
      pos += n;
      auto row = out.Row(0);
      last.assign(row.begin(), row.end());
    }
    if (release) cache.Release(acq->seq, true);
    return last;
  }

  // The same prompt on a cache-less cache: the reference logits.
  std::vector<float> Reference(const std::vector<int32_t>& prompt) {
    HybridCacheConfig c = cfg_;
    c.use_cache = false;
    c.disk_dir.clear();
    auto cache = HybridCache::Create(TinyModel(), c);
    EXPECT_TRUE(cache.ok());
    AcquireResult a;
    return Run(**cache, prompt, {}, &a, false);
  }

  // Fills the conversation A, then an unrelated prompt B whose working set exceeds the budget: A's entries are
  // evicted (spilled to disk) to make room.
  void EvictConversationToDisk() {
    AcquireResult a;
    Run(*cache_, a_, {kLen / 2}, &a);
    EXPECT_EQ(a.resume_pos, 0);
    const std::vector<int32_t> b = Prompt(kLen + kPage, 99);  // fits the budget only once A is evicted
    Run(*cache_, b, {}, &a);
    auto& im = HybridCacheTestPeer::impl(*cache_);
    im.mm->CheckInvariants();
    EXPECT_LE(im.mm->used_bytes(), cfg_.budget_bytes);
    EXPECT_EQ(im.mm->FindTreeResume(Concat(a_, {1})).resume_pos, 0) << "A is still in RAM: nothing to fetch";
    ASSERT_TRUE(im.store);
    im.store->Flush();
    EXPECT_TRUE(im.store->HasState(Prefix(kLen))) << "A's final checkpoint was not spilled";
    EXPECT_TRUE(im.store->HasState(Prefix(kLen / 2))) << "A's checkpoint at the hint was not spilled";
  }

  std::span<const int32_t> Prefix(int32_t n) const { return std::span<const int32_t>(a_).subspan(0, size_t(n)); }

  // Store values ("p-" pages, "s-" states) whose key starts with `prefix`.
  std::vector<std::string> Values(const std::string& prefix) const {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::recursive_directory_iterator(dir_))
      if (e.is_regular_file() && e.path().filename().string().starts_with(prefix)) out.push_back(e.path().string());
    return out;
  }
  uint64_t FolderBytes() const {
    uint64_t total = 0;
    for (const auto& e : std::filesystem::recursive_directory_iterator(dir_))
      if (e.is_regular_file()) total += e.file_size();
    return total;
  }
  static void Corrupt(const std::string& path, size_t at_fraction_of) {
    auto b = ReadFileToString(path);
    ASSERT_TRUE(b.ok());
    (*b)[b->size() - b->size() / at_fraction_of - 1] ^= 0x5a;
    ASSERT_TRUE(WriteFileAtomic(path, *b).ok());
  }

  std::string dir_;
  HybridCacheConfig cfg_;
  std::unique_ptr<HybridCache> cache_;
  const std::vector<int32_t> a_ = Prompt(kLen, 7);
};

TEST_F(DiskTier, EvictedPrefixIsServedFromDiskAtTheMinimumCost) {
  EvictConversationToDisk();
  const std::vector<int32_t> next = Concat(a_, Prompt(24, 8));  // the conversation's next turn
  AcquireResult a;
  std::vector<float> got = Run(*cache_, next, {}, &a);
  EXPECT_EQ(a.report.source, "checkpoint");
  EXPECT_EQ(a.resume_pos, kLen);
  EXPECT_EQ(a.report.lcp, kLen);
  EXPECT_EQ(a.report.extra_tokens, 0) << a.report.reason;  // tokens processed == the minimum (24)
  EXPECT_NE(a.report.reason.find("disk tier"), std::string::npos) << a.report.reason;
  auto& im = HybridCacheTestPeer::impl(*cache_);
  EXPECT_EQ(im.counters.disk_loaded, 1u);
  EXPECT_EQ(im.counters.disk_reads_on_engine, 0u) << "the read happened on the thread that imported it";
  std::vector<float> want = Reference(next);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0) << "not bit-identical";
  im.mm->CheckInvariants();
}

TEST_F(DiskTier, TheFolderStaysUnderTheDiskBoundAcrossConversations) {
  EvictConversationToDisk();
  auto& im = HybridCacheTestPeer::impl(*cache_);
  const int64_t one = im.store->Stats().stored_bytes;
  ASSERT_GT(one, 0);
  cache_.reset();
  std::filesystem::remove_all(dir_);
  cfg_.disk_bytes = one;  // about A's two checkpoints and pages
  auto c = HybridCache::Create(TinyModel(), cfg_);
  ASSERT_TRUE(c.ok());
  for (uint32_t k = 0; k < 4; ++k) {
    AcquireResult a;
    Run(**c, Prompt(kLen, 500 + k), {kLen / 2}, &a);
    ASSERT_TRUE((*c)->Persist().ok());
    auto& ic = HybridCacheTestPeer::impl(**c);
    EXPECT_LE(ic.store->Stats().stored_bytes, cfg_.disk_bytes);
    EXPECT_LE(FolderBytes(), static_cast<uint64_t>(cfg_.disk_bytes) + 4096) << "values beyond the bound + index";
  }
  EXPECT_GT(HybridCacheTestPeer::impl(**c).store->Stats().evicted, 0u);
}

TEST_F(DiskTier, ARestartServesWhatWasWrittenAndOldFormatFilesAreRemoved) {
  EvictConversationToDisk();
  cache_.reset();  // the writer finishes its queue
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/index", std::string("RWCKIDX\1 old index")).ok());
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/ckpt-0123456789abcdef-160.rwck", std::string("old checkpoint")).ok());
  auto c = HybridCache::Create(TinyModel(), cfg_);
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(FileExists(dir_ + "/index"));
  EXPECT_FALSE(FileExists(dir_ + "/ckpt-0123456789abcdef-160.rwck"));
  const std::vector<int32_t> next = Concat(a_, Prompt(24, 8));
  AcquireResult a;
  std::vector<float> got = Run(**c, next, {}, &a);
  EXPECT_EQ(a.resume_pos, kLen) << a.report.reason;
  EXPECT_EQ(a.report.extra_tokens, 0);
  std::vector<float> want = Reference(next);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0) << "not bit-identical";
}

TEST_F(DiskTier, CorruptFileIsSkippedAndTheRequestStillSucceeds) {
  EvictConversationToDisk();
  const std::vector<std::string> deepest = Values("s-" + std::to_string(kLen) + "-");
  ASSERT_EQ(deepest.size(), 1u);
  Corrupt(deepest[0], 2);
  const std::vector<int32_t> next = Concat(a_, Prompt(24, 8));
  AcquireResult a;
  std::vector<float> got = Run(*cache_, next, {}, &a);
  // The corrupt deepest state is skipped (with a warning) and dropped; the next one on disk serves instead.
  EXPECT_EQ(a.report.source, "checkpoint");
  EXPECT_EQ(a.resume_pos, kLen / 2) << a.report.reason;
  auto& im = HybridCacheTestPeer::impl(*cache_);
  im.store->Flush();
  EXPECT_FALSE(FileExists(deepest[0]));
  std::vector<float> want = Reference(next);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0) << "not bit-identical";
  // RAM emptied (without spilling again) and every page on disk corrupt: served from the start, still exact.
  {
    auto all = im.mm->PlanEvictAll();
    ASSERT_TRUE(all.ok());
    auto store = std::move(im.store);
    im.Evict(*all);
    im.store = std::move(store);
    ASSERT_GT(im.store->Stats().states, 0) << "nothing left on disk to corrupt";
  }
  for (const std::string& page : Values("p-")) Corrupt(page, 3);
  got = Run(*cache_, next, {}, &a);
  EXPECT_EQ(a.resume_pos, 0) << a.report.reason;
  EXPECT_EQ(a.report.source, "none");
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0) << "not bit-identical";
}


// ---- KV cache types in persisted files -------------------------------------------------------------------

TEST(PersistedKvType, ASlotSavedWithOneKvTypeIsRefusedByACacheOfAnotherAndRestoredByItsOwn) {
  model::Model& m = TinyModel();
  const std::string path = ::testing::TempDir() + "/rewind_kvtype_" + std::to_string(getpid()) + ".rwck";
  auto make = [&](model::KvTypes t) {
    HybridCacheConfig c;
    c.page_tokens = 16;
    c.kv_type = t;
    c.n_seq_max = 1;
    c.n_ctx = 256;
    c.budget_bytes = 4 * StateBytes(m) + PageBytes(m, 16, t) * 24;
    auto cache = HybridCache::Create(m, c);
    EXPECT_TRUE(cache.ok()) << cache.error().ToString();
    return std::move(cache).value();
  };
  const model::KvTypes saved(model::KvType::kQ8_0, model::KvType::kF16);
  const std::vector<int32_t> prompt = Prompt(40, 5);
  {
    auto cache = make(saved);
    auto acq = cache->Acquire(prompt, {}, true);
    ASSERT_TRUE(acq.ok()) << acq.error().ToString();
    EvalItem item{acq->seq, prompt, false};
    model::ForwardOutput out;
    ASSERT_TRUE(cache->Evaluate({&item, 1}, &out).ok());
    auto bytes = cache->SaveSequence(acq->seq, path);
    ASSERT_TRUE(bytes.ok()) << bytes.error().ToString();
    cache->Release(acq->seq, true);
  }
  for (model::KvTypes other : {model::KvTypes(model::KvType::kF16), model::KvTypes(model::KvType::kQ8_0),
                               model::KvTypes(model::KvType::kF16, model::KvType::kQ8_0)}) {
    auto r = make(other)->LoadIntoTree(path);
    ASSERT_FALSE(r.ok()) << kernels::KvTypesName(other);
    EXPECT_EQ(r.error().kind, ErrorKind::kUnsupported);
    EXPECT_NE(r.error().message.find("KV cache of type q8_0/f16, this cache is " + kernels::KvTypesName(other)),
              std::string::npos)
        << r.error().message;
  }
  auto r = make(saved)->LoadIntoTree(path);
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(*r, 40);
  std::filesystem::remove(path);
}

TEST(CacheBudget, PagesCountTheRealBytesOfTheKvTypes) {
  // q8_0 rows are 34/64 of F16 rows, q4_0 rows 18/64; the budget holds that many more pages.
  model::Model& m = TinyModel();
  EXPECT_EQ(PageBytes(m, 16, model::KvType::kQ8_0) * 32, PageBytes(m, 16, model::KvType::kF16) * 17);
  EXPECT_EQ(PageBytes(m, 16, model::KvType::kQ4_0) * 32, PageBytes(m, 16, model::KvType::kF16) * 9);
}

}  // namespace
}  // namespace rw::engine
