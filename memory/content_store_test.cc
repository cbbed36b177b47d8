// The content-addressed disk tier store over a temporary folder: values round-trip, pages are shared and
// stored once (a conversation's bytes grow linearly), restarts read the index, values no index names are swept,
// corrupt or foreign values are rejected, and the byte bound is kept by evicting the lowest-scoring states.
#include "memory/content_store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <random>
#include <thread>

#include "base/file.h"
#include "base/hash.h"
#include "memory/dir_store.h"
#include "memory/store_test_util.h"

namespace rw::memory {
namespace {

constexpr int32_t kPage = 8;
constexpr int32_t kRowBytes = 16;   // bytes of one token's rows, all layers, K and V
constexpr size_t kStateBytes = 400;

class ContentStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/rewind_store_" + std::to_string(getpid());
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  static ContentStoreConfig Config(int64_t max_bytes = 0, uint64_t identity = 42) {
    ContentStoreConfig c;
    c.identity = identity;
    c.page_tokens = kPage;
    c.kv_bytes_per_token = kRowBytes;
    c.max_bytes = max_bytes;
    return c;
  }
  std::unique_ptr<ContentStore> Open(int64_t max_bytes = 0, uint64_t identity = 42) {
    auto b = DirectoryStore::Open(dir_);
    EXPECT_TRUE(b.ok());
    auto s = ContentStore::Open(std::move(b).value(), Config(max_bytes, identity));
    EXPECT_TRUE(s.ok());
    return std::move(s).value();
  }

  // The rows of positions [first, end) as the engine would copy them: a function of the tokens only.
  static std::string Rows(std::span<const int32_t> tokens, int32_t first, int32_t end) {
    std::string r;
    for (int32_t q = first; q < end; ++q) r.append(kRowBytes, static_cast<char>(tokens[q] * 7 + q));
    return r;
  }
  static std::string State(std::span<const int32_t> prefix) {
    return std::string(kStateBytes, static_cast<char>(prefix.size() * 3 + prefix.back()));
  }
  // Queues the checkpoint after prefix, with the pages the store lacks.
  static bool Put(ContentStore& s, std::span<const int32_t> prefix, int64_t saved, bool urgent = false) {
    StorePut p;
    p.tokens.assign(prefix.begin(), prefix.end());
    auto state = std::make_shared<const std::string>(State(prefix));
    p.state = *state;
    p.state_owner = state;
    for (int32_t e : s.MissingPages(prefix)) p.pages.emplace_back(e, Rows(prefix, ((e - 1) / kPage) * kPage, e));
    p.saved_tokens = saved;
    return s.Enqueue(std::move(p), urgent);
  }
  // A store holding the checkpoint after `t` (written), and the backend under it.
  std::unique_ptr<ContentStore> Stored(const std::vector<int32_t>& t) {
    auto s = Open();
    EXPECT_TRUE(Put(*s, t, static_cast<int64_t>(t.size())));
    s->Flush();
    return s;
  }
  std::unique_ptr<DirectoryStore> Backend() const {
    auto b = DirectoryStore::Open(dir_);
    EXPECT_TRUE(b.ok());
    return std::move(b).value();
  }
  uint64_t FolderBytes() const {
    uint64_t total = 0;
    for (const auto& e : std::filesystem::recursive_directory_iterator(dir_))
      if (e.is_regular_file()) total += e.file_size();
    return total;
  }

  std::vector<int32_t> Tokens(int n, uint32_t seed) const {
    std::mt19937 rng(seed);
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (auto& x : t) x = static_cast<int32_t>(rng() % 1000);
    return t;
  }

  std::string dir_;
};

TEST_F(ContentStoreTest, StatesAndPagesRoundTripAndSurviveARestart) {
  const std::vector<int32_t> t = Tokens(30, 1);
  const std::span<const int32_t> prefix(t.data(), 21);  // two full pages and a partial one
  {
    auto s = Open();
    ASSERT_TRUE(Put(*s, prefix, 21));
    EXPECT_TRUE(s->HasState(prefix));  // queued counts
    s->Flush();
    EXPECT_EQ(s->Stats().states, 1);
    EXPECT_EQ(s->Stats().pages, 3);
  }
  auto s = Open();
  EXPECT_TRUE(s->HasState(prefix));
  EXPECT_TRUE(s->MissingPages(prefix).empty());
  EXPECT_EQ(s->StatesOnPath(t, 0, 29), std::vector<int32_t>{21});
  EXPECT_TRUE(s->StatesOnPath(Tokens(30, 2), 0, 29).empty());
  auto state = s->ReadState(prefix);
  ASSERT_TRUE(state.ok()) << state.error().ToString();
  EXPECT_EQ(*state, State(prefix));
  auto pages = s->ReadPages(prefix, 1);
  ASSERT_TRUE(pages.ok()) << pages.error().ToString();
  ASSERT_EQ(pages->size(), 2u);
  EXPECT_EQ((*pages)[0], Rows(prefix, 8, 16));
  EXPECT_EQ((*pages)[1], Rows(prefix, 16, 21));
}

TEST_F(ContentStoreTest, AConversationsBytesGrowLinearlyWithItsLength) {
  auto s = Open();
  const std::vector<int32_t> t = Tokens(1000, 3);
  const int n = 20;  // checkpoints every 50 tokens, as a conversation of 20 turns leaves them
  for (int i = 1; i <= n; ++i) ASSERT_TRUE(Put(*s, std::span<const int32_t>(t.data(), size_t(i) * 50), 50));
  s->Flush();
  // Each page once (the full pages of 1000 tokens, plus one partial page per checkpoint off a page boundary),
  // one state per checkpoint, and a bounded header per value: O(n), where one file per checkpoint holding its
  // whole prefix would cost sum(i * 50) rows = O(n^2).
  const uint64_t rows = 1000 * kRowBytes + n * kPage * kRowBytes;
  const uint64_t per_value = 64 + 8 + kPage * 4;
  const uint64_t bound = rows + n * (kStateBytes + 64 + 8 + kPage * 4) + (1000 / kPage + n) * per_value;
  EXPECT_LE(static_cast<uint64_t>(s->Stats().stored_bytes), bound);
  EXPECT_LE(FolderBytes(), bound + 40 + 48 * (1000 / kPage + 2 * n));  // + the index
  uint64_t quadratic = 0;
  for (int i = 1; i <= n; ++i) quadratic += uint64_t(i) * 50 * kRowBytes;
  EXPECT_LT(FolderBytes() * 3, quadratic);
}

TEST_F(ContentStoreTest, ValuesNoIndexNamesAreSweptAtStart) {
  const std::vector<int32_t> t = Tokens(16, 4);
  Stored(t).reset();
  auto b = Backend();
  ASSERT_TRUE(b->Put("p-8-00000000000000aa", "left by a crash").ok());
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/aa/p-8-00000000000000aa.tmp.1", std::string("torn")).ok());
  auto s = Open();
  s->Flush();  // the sweep runs on the writer before anything else
  auto keys = b->Keys();
  ASSERT_TRUE(keys.ok());
  EXPECT_EQ(keys->size(), 4u);  // index, two pages, one state
  EXPECT_FALSE(FileExists(dir_ + "/aa/p-8-00000000000000aa"));
  EXPECT_FALSE(FileExists(dir_ + "/aa/p-8-00000000000000aa.tmp.1"));
  EXPECT_TRUE(s->HasState(t));
}

TEST_F(ContentStoreTest, CorruptForeignAndMismatchedValuesAreRejected) {
  const std::vector<int32_t> t = Tokens(20, 5);
  auto s = Stored(t);
  auto b = Backend();
  const uint64_t c16 = HashTokens(std::span<const int32_t>(t.data(), 16), 42);
  auto page = b->Get(PageKey(16, c16));
  ASSERT_TRUE(page.ok());
  std::string bad = *page;
  bad[bad.size() - 3] ^= 0x20;
  ASSERT_TRUE(b->Put(PageKey(16, c16), bad).ok());
  auto pages = s->ReadPages(t, 0);
  ASSERT_FALSE(pages.ok());
  EXPECT_EQ(pages.error().kind, ErrorKind::kCorrupt);
  // A value under another value's key, and a value of another model, are never read as it.
  EXPECT_FALSE(DecodeBlob(*page, 42, BlobKind::kPage, 8, c16).ok());
  EXPECT_EQ(DecodeBlob(*page, 43, BlobKind::kPage, 16, c16).error().kind, ErrorKind::kUnsupported);
  EXPECT_TRUE(DecodeBlob(*page, 42, BlobKind::kPage, 16, c16).ok());
  s->Forget(t);
  s->Flush();
  EXPECT_FALSE(s->HasState(t));
  EXPECT_EQ(s->Stats().pages, 0);
  // The index of another identity (model, KV type, format) starts an empty store and its values are swept.
  ASSERT_TRUE(Put(*s, t, 20));
  s.reset();
  auto other = Open(0, 43);
  other->Flush();
  EXPECT_FALSE(other->HasState(t));
  auto keys = b->Keys();
  ASSERT_TRUE(keys.ok());
  EXPECT_EQ(keys->size(), 1u);  // the new, empty index
}

TEST_F(ContentStoreTest, TheByteBoundEvictsTheLowestScoringStatesAndTheirPages) {
  const std::vector<int32_t> t = Tokens(64, 6);
  uint64_t one = 0;
  {
    auto s = Open();
    ASSERT_TRUE(Put(*s, std::span<const int32_t>(t.data(), 32), 32));
    s->Flush();
    one = static_cast<uint64_t>(s->Stats().stored_bytes);
  }
  std::filesystem::remove_all(dir_);
  auto s = Open(static_cast<int64_t>(one + one / 2));
  // Unrelated conversations, each worth more than the last: every new one evicts the one before.
  for (uint32_t k = 0; k < 5; ++k) {
    const std::vector<int32_t> c = Tokens(32, 100 + k);
    ASSERT_TRUE(Put(*s, c, 32 + k));
    s->Flush();
    EXPECT_LE(s->Stats().stored_bytes, static_cast<int64_t>(one + one / 2));
    EXPECT_TRUE(s->HasState(c));
  }
  EXPECT_EQ(s->Stats().evicted, 4u);
  EXPECT_EQ(s->Stats().pages, 4);  // the survivor's only
  // One worth less than what is stored is not kept.
  ASSERT_TRUE(Put(*s, Tokens(32, 200), 1));
  s->Flush();
  EXPECT_FALSE(s->HasState(Tokens(32, 200)));
  EXPECT_EQ(s->Stats().dropped_score, 1u);
  EXPECT_LE(FolderBytes(), one + one / 2 + 40 + 48 * 5);
}

// A backend whose writes wait until the test opens the gate: a disk that stalls.
// Every write waits until Open(); puts (their keys) and syncs ("sync") are logged in order; fail_index makes the
// index's puts fail (a full disk).
class StalledBackend final : public StoreBackend {
 public:
  explicit StalledBackend(std::unique_ptr<StoreBackend> inner, bool open = false)
      : inner_(std::move(inner)), open_(open) {}
  std::atomic<bool> fail_index{false};
  std::vector<std::string> Log() {
    std::lock_guard<std::mutex> lock(mu_);
    return log_;
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  bool Stalled() {
    std::lock_guard<std::mutex> lock(mu_);
    return waiting_;
  }
  Expected<std::string> Get(const std::string& key) override { return inner_->Get(key); }
  Status PutParts(const std::string& key, std::span<const std::string_view> parts) override {
    std::unique_lock<std::mutex> lock(mu_);
    waiting_ = true;
    cv_.wait(lock, [&] { return open_; });
    log_.push_back(key);
    if (fail_index && key == kIndexKey) return Error::Io("no space left on device");
    return inner_->PutParts(key, parts);
  }
  Status Sync() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      log_.push_back("sync");
    }
    return inner_->Sync();
  }
  Expected<bool> Exists(const std::string& key) override { return inner_->Exists(key); }
  Status Delete(const std::string& key) override { return inner_->Delete(key); }
  Expected<std::vector<std::string>> Keys() override { return inner_->Keys(); }
  std::string Describe() const override { return "stalled " + inner_->Describe(); }

 private:
  std::unique_ptr<StoreBackend> inner_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false, waiting_ = false;
  std::vector<std::string> log_;
};

TEST_F(ContentStoreTest, AStalledDiskNeverBlocksTheCallerAndTheQueueStaysBounded) {
  auto stalled = std::make_unique<StalledBackend>(Backend());
  StalledBackend* gate = stalled.get();
  ContentStoreConfig c;
  c.identity = 42;
  c.page_tokens = kPage;
  c.kv_bytes_per_token = kRowBytes;
  c.queue_bytes = 2000;  // about two checkpoints of 24 tokens
  auto s = ContentStore::Open(std::move(stalled), c);
  ASSERT_TRUE(s.ok());
  std::vector<std::vector<int32_t>> convs;
  for (uint32_t k = 0; k < 6; ++k) convs.push_back(Tokens(24, 300 + k));
  ASSERT_TRUE(Put(**s, convs[0], 24));
  while (!gate->Stalled()) std::this_thread::yield();  // the writer is stuck inside its first write
  int queued = 1;
  for (size_t k = 1; k < convs.size(); ++k) queued += Put(**s, convs[k], 24) ? 1 : 0;  // returns at once
  const ContentStoreStats before = (*s)->Stats();
  EXPECT_LE(before.queued_bytes, c.queue_bytes);
  EXPECT_GT(before.dropped_queue_full, 0u);
  EXPECT_EQ(static_cast<uint64_t>(queued) + before.dropped_queue_full, convs.size());
  gate->Open();
  (*s)->Flush();
  EXPECT_EQ((*s)->Stats().states, queued);  // everything queued was written
  for (size_t k = 0; k < convs.size(); ++k) EXPECT_EQ((*s)->HasState(convs[k]), static_cast<int>(k) < queued) << k;
}

// A backend whose deletes fail while `failing` is set (a read-only remount, a permission change).
class FlakyDeleteBackend final : public StoreBackend {
 public:
  explicit FlakyDeleteBackend(std::unique_ptr<StoreBackend> inner) : inner_(std::move(inner)) {}
  std::atomic<bool> failing{true};
  Expected<std::string> Get(const std::string& key) override { return inner_->Get(key); }
  Status PutParts(const std::string& key, std::span<const std::string_view> parts) override {
    return inner_->PutParts(key, parts);
  }
  Status Sync() override { return inner_->Sync(); }
  Expected<bool> Exists(const std::string& key) override { return inner_->Exists(key); }
  Status Delete(const std::string& key) override {
    if (failing) return Error::Io("cannot delete " + key + ": read-only file system");
    return inner_->Delete(key);
  }
  Expected<std::vector<std::string>> Keys() override { return inner_->Keys(); }
  std::string Describe() const override { return "flaky " + inner_->Describe(); }

 private:
  std::unique_ptr<StoreBackend> inner_;
};

TEST_F(ContentStoreTest, TheFolderNeverHoldsMoreThanTheBoundAfterEachWrite) {
  const int64_t bound = 6000;
  {
    auto s = Open(bound);
    for (uint32_t k = 0; k < 12; ++k) {
      ASSERT_TRUE(Put(*s, Tokens(40, 400 + k), 40 + k));
      s->Flush();
      EXPECT_LE(FolderBytes(), static_cast<uint64_t>(bound)) << k;
    }
    EXPECT_GT(s->Stats().evicted, 0u);
  }
  // Reopened with a smaller bound: it evicts down to it before writing anything.
  auto s = Open(bound / 3);
  s->Flush();
  EXPECT_LE(FolderBytes(), static_cast<uint64_t>(bound / 3));
  EXPECT_GT(s->Stats().states, 0);
}

TEST_F(ContentStoreTest, FailedDeletesAreCountedKeptInTheBoundAndRetried) {
  const int64_t bound = 6000;
  auto flaky = std::make_unique<FlakyDeleteBackend>(Backend());
  FlakyDeleteBackend* disk = flaky.get();
  ContentStoreConfig c;
  c.identity = 42;
  c.page_tokens = kPage;
  c.kv_bytes_per_token = kRowBytes;
  c.max_bytes = bound;
  auto s = ContentStore::Open(std::move(flaky), c);
  ASSERT_TRUE(s.ok());
  for (uint32_t k = 0; k < 8; ++k) {
    ASSERT_TRUE(Put(**s, Tokens(40, 500 + k), 40 + k));
    (*s)->Flush();
    EXPECT_LE(FolderBytes(), static_cast<uint64_t>(bound)) << k;  // what could not be deleted still counts
  }
  ContentStoreStats st = (*s)->Stats();
  EXPECT_GT(st.delete_errors, 0u);
  EXPECT_GT(st.undeleted_bytes, 0);
  // Deletes work again: the next write retries them.
  disk->failing = false;
  ASSERT_TRUE(Put(**s, Tokens(40, 600), 100));
  (*s)->Flush();
  st = (*s)->Stats();
  EXPECT_EQ(st.undeleted_bytes, 0);
  EXPECT_LE(FolderBytes(), static_cast<uint64_t>(bound));
  EXPECT_TRUE((*s)->HasState(Tokens(40, 600)));
}

TEST_F(ContentStoreTest, AResponsesEndStateGoesFirstAndIsInPlaceForARestartWhenItsWaitReturns) {
  auto stalled = std::make_unique<StalledBackend>(Backend());
  StalledBackend* gate = stalled.get();
  auto opened = ContentStore::Open(std::move(stalled), Config());
  ASSERT_TRUE(opened.ok());
  ContentStore& s = **opened;
  const std::vector<int32_t> x = Tokens(24, 500), older = Tokens(24, 501), end = Tokens(24, 502);
  ASSERT_TRUE(Put(s, x, 24));
  while (!gate->Stalled()) std::this_thread::yield();  // the writer is stuck inside x's first write
  ASSERT_TRUE(Put(s, older, 24));
  ASSERT_TRUE(Put(s, end, 24, /*urgent=*/true));  // a response's end state, queued after `older`
  const uint64_t chain = s.Chain(end);
  using Clock = std::chrono::steady_clock;
  EXPECT_EQ(s.WaitVisible(24, chain, Clock::now() + std::chrono::milliseconds(20)), Visibility::kTimedOut);
  gate->Open();
  ASSERT_EQ(s.WaitVisible(24, chain, Clock::now() + std::chrono::seconds(60)), Visibility::kVisible);
  const std::string crashed = dir_ + "-crashed";
  testing::CopyAsACrashLeavesIt(dir_, crashed);
  {
    auto b = DirectoryStore::Open(crashed);
    ASSERT_TRUE(b.ok());
    auto restarted = ContentStore::Open(std::move(b).value(), Config());
    ASSERT_TRUE(restarted.ok());
    EXPECT_TRUE((*restarted)->HasState(end));
    EXPECT_EQ((*restarted)->WaitVisible(24, chain, Clock::now()), Visibility::kVisible);  // read from the index
    auto state = (*restarted)->ReadState(end);
    ASSERT_TRUE(state.ok()) << state.error().ToString();
    EXPECT_EQ(*state, State(end));
    auto pages = (*restarted)->ReadPages(end, 0);
    ASSERT_TRUE(pages.ok()) << pages.error().ToString();
    EXPECT_EQ(pages->size(), 3u);
  }
  std::filesystem::remove_all(crashed);
  s.Flush();
  // The order of the writes: x (already under way), then the end state and the index naming it, with no sync
  // in between (syncs come after), and only then the older checkpoint.
  const std::vector<std::string> log = gate->Log();
  auto at = [&](const std::string& key, size_t from = 0) {
    return static_cast<size_t>(std::find(log.begin() + static_cast<std::ptrdiff_t>(from), log.end(), key) -
                               log.begin());
  };
  const size_t first_index = at(kIndexKey), end_state = at(StateKey(24, chain));
  const size_t end_index = at(kIndexKey, end_state), older_state = at(StateKey(24, s.Chain(older)));
  ASSERT_LT(older_state, log.size());
  EXPECT_LT(first_index, end_state);
  EXPECT_LT(end_index, older_state);
  EXPECT_EQ(at("sync", first_index), at("sync", end_index)) << "a sync delayed the end state";
}

TEST_F(ContentStoreTest, AWaitForAStateThatIsNotStoredEndsAtOnce) {
  using Clock = std::chrono::steady_clock;
  const auto later = Clock::now() + std::chrono::seconds(60);  // never reached unless the wait is wrong
  const std::vector<int32_t> t = Tokens(24, 510);
  {
    auto s = Open(/*max_bytes=*/100);  // smaller than one state: it is not kept
    EXPECT_EQ(s->WaitVisible(24, s->Chain(t), later), Visibility::kNotStored);  // never queued
    ASSERT_TRUE(Put(*s, t, 24, /*urgent=*/true));
    EXPECT_EQ(s->WaitVisible(24, s->Chain(t), later), Visibility::kNotStored);
    EXPECT_EQ(s->Stats().dropped_score, 1u);
  }
  auto failing = std::make_unique<StalledBackend>(Backend(), /*open=*/true);
  failing->fail_index = true;  // the value is written, the index naming it is not
  auto s = ContentStore::Open(std::move(failing), Config());
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(Put(**s, t, 24, /*urgent=*/true));
  EXPECT_EQ((*s)->WaitVisible(24, (*s)->Chain(t), later), Visibility::kNotStored);
  EXPECT_GE((*s)->Stats().write_errors, 1u);
}

}  // namespace
}  // namespace rw::memory
