#include "remote/remote_store.h"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "base/hash.h"
#include "memory/store_format.h"
#include "remote/redis_test_server.h"

namespace rw::remote {
namespace {

using testing::RedisTestServer;

constexpr int32_t kPage = 4;

RemoteStoreConfig Config(uint64_t identity = memory::StoreIdentity(42, "f16")) {
  RemoteStoreConfig c;
  c.identity = identity;
  c.page_tokens = kPage;
  c.mac_key = "the replicas' shared test key";
  return c;
}

std::unique_ptr<RemoteStore> OpenStore(const std::string& url, RemoteStoreConfig c = Config()) {
  auto s = RemoteStore::Open(ParseRedisUrl(url).value(), c, testing::FastOptions());
  EXPECT_TRUE(s.ok());
  return std::move(s).value();
}

// A checkpoint after tokens[0, end) whose page rows are "page <end>" and whose state is "state <end>".
memory::StorePut Put(const std::vector<int32_t>& tokens, int32_t end, const RemoteStore& store) {
  memory::StorePut p;
  p.tokens.assign(tokens.begin(), tokens.begin() + end);
  auto state = std::make_shared<const std::string>("state " + std::to_string(end));
  p.state = *state;
  p.state_owner = state;
  for (int32_t e : store.MissingPages(p.tokens)) p.pages.emplace_back(e, "page " + std::to_string(e));
  return p;
}

std::vector<int32_t> Tokens(int n, int seed = 1) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back((i * 7 + seed * 13) % 50);
  return t;
}

TEST(RemoteStore, AnotherReplicaFetchesTheDeepestStateWithItsPages) {
  REWIND_REQUIRE_REDIS();
  RedisTestServer server;
  auto a = OpenStore(server.url());
  auto b = OpenStore(server.url());
  std::vector<int32_t> t = Tokens(30);
  ASSERT_TRUE(a->Enqueue(Put(t, 9, *a)));
  ASSERT_TRUE(a->Enqueue(Put(t, 17, *a)));  // sends only the pages after 8
  a->Flush();
  EXPECT_EQ(a->Stats().written, 2u);
  std::vector<int32_t> cands{5, 9, 17, 25};
  RemoteFetch f = b->Fetch(t, cands, 0, 1);
  ASSERT_EQ(f.end, 17);
  EXPECT_FALSE(f.error);
  EXPECT_EQ(f.state, "state 17");
  EXPECT_EQ(f.first_page, 1);
  ASSERT_EQ(f.pages.size(), 4u);  // ends 8, 12, 16, 17 (the partial last page)
  EXPECT_EQ(f.pages[0], "page 8");
  EXPECT_EQ(f.pages[3], "page 17");
  EXPECT_GT(f.bytes, 0);
  // Only candidates after `after` count; another prompt with the same prefix finds the shallower state.
  EXPECT_EQ(b->Fetch(t, cands, 17, 0).end, 0);
  std::vector<int32_t> other = t;
  other[12] = 49;
  EXPECT_EQ(b->Fetch(other, cands, 0, 0).end, 9);
  EXPECT_EQ(b->Stats().hits, 2u);
  EXPECT_EQ(b->Stats().misses, 1u);
}

TEST(RemoteStore, ADifferentIdentityNeverSharesValues) {
  REWIND_REQUIRE_REDIS();
  RedisTestServer server;
  auto a = OpenStore(server.url());
  auto other_build = OpenStore(server.url(), Config(memory::StoreIdentity(43, "f16")));
  std::vector<int32_t> t = Tokens(20);
  ASSERT_TRUE(a->Enqueue(Put(t, 10, *a)));
  a->Flush();
  std::vector<int32_t> cands{10};
  EXPECT_EQ(other_build->Fetch(t, cands, 0, 0).end, 0);
  EXPECT_EQ(OpenStore(server.url())->Fetch(t, cands, 0, 0).end, 10);
}

TEST(RemoteStore, ACorruptValueIsDeletedAndNeverUsed) {
  REWIND_REQUIRE_REDIS();
  RedisTestServer server;
  auto a = OpenStore(server.url());
  std::vector<int32_t> t = Tokens(20);
  ASSERT_TRUE(a->Enqueue(Put(t, 6, *a)));
  ASSERT_TRUE(a->Enqueue(Put(t, 10, *a)));
  a->Flush();
  // Flip one byte of the deeper state's value (a torn or foreign write).
  RedisClient raw(ParseRedisUrl(server.url()).value(), testing::FastOptions());
  const std::string key = "rewind:" + memory::MacKeyId(Config().mac_key) + ":" +
                          memory::StateKey(10, HashTokens(std::span(t).subspan(0, 10), Config().identity));
  auto v = raw.Get(key);
  ASSERT_TRUE(v.ok() && v->has_value());
  std::string bad = **v;
  bad[bad.size() - 1] ^= 0x5a;
  ASSERT_TRUE(raw.Put(key, bad).ok());
  std::vector<int32_t> cands{6, 10};
  RemoteFetch f = a->Fetch(t, cands, 0, 0);
  EXPECT_EQ(f.end, 6);  // the next exact state, never the corrupt one
  EXPECT_EQ(a->Stats().unauthenticated, 1u);  // any changed byte fails the MAC first
  EXPECT_FALSE(raw.Exists(key).value());
}

TEST(RemoteStore, StoredBytesGrowLinearlyWithAConversation) {
  REWIND_REQUIRE_REDIS();
  RedisTestServer server;
  auto a = OpenStore(server.url());
  std::vector<int32_t> t = Tokens(400);
  for (int32_t end = 20; end <= 400; end += 20) ASSERT_TRUE(a->Enqueue(Put(t, end, *a)));
  a->Flush();
  // Every page once (100 full pages + a partial one per non-aligned checkpoint: none here) and 20 states.
  RedisClient raw(ParseRedisUrl(server.url()).value(), testing::FastOptions());
  EXPECT_EQ(
      std::system(("test \"$(redis-cli -p " + std::to_string(server.port()) + " dbsize)\" = 120").c_str()),
      0);
  EXPECT_EQ(a->Stats().written, 20u);
}

TEST(RemoteStore, ADeadRedisIsAMissAndWritesNeverBlock) {
  REWIND_REQUIRE_REDIS();
  RedisTestServer server;
  server.Stop();
  auto a = OpenStore(server.url());
  std::vector<int32_t> t = Tokens(20);
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(a->Enqueue(Put(t, 10 + i, *a)));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(100));
  a->Flush();
  EXPECT_GE(a->Stats().write_errors, 1u);
  std::vector<int32_t> cands{10};
  RemoteFetch f = a->Fetch(t, cands, 0, 0);
  EXPECT_EQ(f.end, 0);
  EXPECT_TRUE(f.error);
  // Redis comes back: writes and reads work again after the back-off.
  ASSERT_TRUE(server.Start());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ASSERT_TRUE(a->Enqueue(Put(t, 10, *a)));  // not known: its failed write was forgotten
  a->Flush();
  EXPECT_EQ(a->Fetch(t, cands, 0, 0).end, 10);
}

TEST(RemoteStore, AFlushedRedisIsAMiss) {
  REWIND_REQUIRE_REDIS();
  RedisTestServer server;
  auto a = OpenStore(server.url());
  std::vector<int32_t> t = Tokens(20);
  ASSERT_TRUE(a->Enqueue(Put(t, 10, *a)));
  a->Flush();
  ASSERT_EQ(server.Cli("flushall"), 0);
  std::vector<int32_t> cands{10};
  RemoteFetch f = a->Fetch(t, cands, 0, 0);
  EXPECT_EQ(f.end, 0);
  EXPECT_FALSE(f.error);
}

RemoteStoreConfig Waiting(int64_t wait_ms) {
  RemoteStoreConfig c = Config();
  c.wait_ms = wait_ms;
  return c;
}

// A request on `store` starts: its lookup (no candidates here) announces the state at `at` of `prompt`.
void Announce(RemoteStore& store, std::span<const int32_t> prompt, int32_t at) {
  EXPECT_EQ(store.Fetch(prompt, {}, 0, 0, at).end, 0);
}

// Runs `f` on another thread 100 ms from now, while the caller waits in a lookup.
std::thread Soon(std::function<void()> f) {
  return std::thread([f = std::move(f)] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    f();
  });
}

// The next turn of a conversation often reaches another replica before the previous replica's write has landed:
// the announcement makes it wait for the state instead of recomputing.
TEST(RemoteStore, ALookupWaitsForAStateAnotherReplicaAnnounced) {
  REWIND_REQUIRE_REDIS();
  RedisTestServer server;
  auto a = OpenStore(server.url());
  auto b = OpenStore(server.url(), Waiting(60'000));  // ends when the state lands, long before
  std::vector<int32_t> t = Tokens(30);
  Announce(*a, std::span(t).first(12), 9);
  EXPECT_EQ(a->Stats().announced, 1u);
  std::thread writer = Soon([&] { EXPECT_TRUE(a->Enqueue(Put(t, 9, *a))); });  // a's request ends
  std::vector<int32_t> cands{5, 9, 17};
  RemoteFetch f = b->Fetch(t, cands, 0, 0);
  writer.join();
  EXPECT_EQ(f.end, 9);
  EXPECT_EQ(f.state, "state 9");
  EXPECT_GT(f.waited_seconds, 0);
  EXPECT_EQ(b->Stats().waits, 1u);
  EXPECT_EQ(b->Stats().waits_served, 1u);
  a->Flush();  // the writer removed the announcement with the write: nobody waits for it any more
  auto c = OpenStore(server.url(), Waiting(60'000));
  std::vector<int32_t> deeper{9, 13};
  EXPECT_EQ(c->Fetch(t, deeper, 0, 0).end, 9);
  EXPECT_EQ(c->Stats().waits, 0u);
}

TEST(RemoteStore, AWithdrawnAnnouncementEndsTheWaitWithAMiss) {
  REWIND_REQUIRE_REDIS();
  RedisTestServer server;
  auto a = OpenStore(server.url());
  auto b = OpenStore(server.url(), Waiting(60'000));
  std::vector<int32_t> t = Tokens(30);
  Announce(*a, std::span(t).first(12), 9);
  // a's request was cancelled before its state existed.
  std::thread withdraw = Soon([&] { a->Withdraw(std::span(t).first(9)); });
  std::vector<int32_t> cands{9};
  RemoteFetch f = b->Fetch(t, cands, 0, 0);
  withdraw.join();
  EXPECT_EQ(f.end, 0);
  EXPECT_EQ(b->Stats().waits, 1u);
  EXPECT_EQ(b->Stats().waits_served, 0u);
}

TEST(RemoteStore, AReplicaNeverWaitsForItsOwnAnnouncementOrPastItsBound) {
  REWIND_REQUIRE_REDIS();
  RedisTestServer server;
  auto a = OpenStore(server.url(), Waiting(60'000));
  std::vector<int32_t> t = Tokens(30);
  std::vector<int32_t> cands{9};
  Announce(*a, std::span(t).first(12), 9);
  EXPECT_EQ(a->Fetch(t, cands, 0, 0).end, 0);  // its own request in flight: its RAM will serve it
  EXPECT_EQ(a->Stats().waits, 0u);
  auto b = OpenStore(server.url(), Waiting(50));  // an announcer killed before writing: the wait ends at the bound
  EXPECT_EQ(b->Fetch(t, cands, 0, 0).end, 0);
  EXPECT_EQ(b->Stats().waits, 1u);
  EXPECT_EQ(b->Stats().waits_served, 0u);
}

}  // namespace
}  // namespace rw::remote
