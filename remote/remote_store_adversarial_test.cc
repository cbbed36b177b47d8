// The remote tier against someone who can write to its Redis (docs/replicas.md, "Trust"): a value planted
// without the replicas' key, with a wrong MAC, or larger than this cache expects, and a planted announcement,
// are each rejected and counted, and the lookup falls back to what is genuine; a lookup never reads more than
// its byte cap.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "base/hash.h"
#include "memory/store_format.h"
#include "remote/redis_test_server.h"
#include "remote/remote_store.h"

namespace rw::remote {
namespace {

using testing::RedisTestServer;

constexpr int32_t kPage = 4;
constexpr int64_t kStateBytes = 64, kPageBytesPerToken = 16;
const uint64_t kIdentity = memory::StoreIdentity(42, "f16");
const std::string kKey = "the replicas' shared test key";

RemoteStoreConfig Config(std::string mac_key = kKey) {
  RemoteStoreConfig c;
  c.identity = kIdentity;
  c.page_tokens = kPage;
  c.mac_key = std::move(mac_key);
  c.trust = c.mac_key.empty();
  c.state_bytes = kStateBytes;
  c.page_bytes_per_token = kPageBytesPerToken;
  c.wait_ms = 0;
  return c;
}

std::unique_ptr<RemoteStore> OpenStore(const std::string& url, const RemoteStoreConfig& c = Config()) {
  auto s = RemoteStore::Open(ParseRedisUrl(url).value(), c, testing::FastOptions());
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message);
  return s.ok() ? std::move(s).value() : nullptr;
}

std::vector<int32_t> Tokens(int n) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back((i * 11 + 3) % 50);
  return t;
}

// A genuine checkpoint after tokens[0, end): state and page payloads of exactly the expected sizes.
memory::StorePut Put(const std::vector<int32_t>& tokens, int32_t end, const RemoteStore& store) {
  memory::StorePut p;
  p.tokens.assign(tokens.begin(), tokens.begin() + end);
  auto state = std::make_shared<const std::string>(kStateBytes, static_cast<char>('a' + end % 26));
  p.state = *state;
  p.state_owner = state;
  for (int32_t e : store.MissingPages(p.tokens))
    p.pages.emplace_back(e, std::string(static_cast<size_t>((e - (e - 1) / kPage * kPage) * kPageBytesPerToken), 'p'));
  return p;
}

std::string StateKeyOf(const std::vector<int32_t>& t, int32_t end, const std::string& mac_key = kKey) {
  return "rewind:" + memory::MacKeyId(mac_key) + ":" +
         memory::StateKey(end, HashTokens(std::span(t).subspan(0, static_cast<size_t>(end)), kIdentity));
}

// The state value an attacker would make for tokens[0, end): a well-formed blob, sealed with `mac_key`.
std::string Forged(const std::vector<int32_t>& t, int32_t end, const std::string& mac_key, bool seal = true) {
  const int32_t first = (end - 1) / kPage * kPage;
  const uint64_t parent = HashTokens(std::span(t).subspan(0, static_cast<size_t>(first)), kIdentity);
  std::string v = memory::EncodeBlob(kIdentity, memory::BlobKind::kState, first,
                                     std::span(t).subspan(static_cast<size_t>(first), static_cast<size_t>(end - first)),
                                     first == 0 ? kIdentity : parent, std::string(kStateBytes, 'X'));
  if (seal) memory::SealValue(mac_key, StateKeyOf(t, end), &v);
  return v;
}

TEST(RemoteStoreAdversarial, AStoreWithoutAKeyOpensOnlyWhenTrusted) {
  RemoteStoreConfig c = Config("");
  c.trust = false;
  auto refused = RemoteStore::Open(ParseRedisUrl("redis://127.0.0.1:1").value(), c, testing::FastOptions());
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("--remote-cache-trust"), std::string::npos);
}

TEST(RemoteStoreAdversarial, APlantedValueWithoutOrWithAWrongMacIsRejectedCountedAndDeleted) {
  REWIND_REQUIRE_REDIS();
  RedisTestServer server;
  auto a = OpenStore(server.url());
  std::vector<int32_t> t = Tokens(30);
  ASSERT_TRUE(a->Enqueue(Put(t, 9, *a)));  // genuine, with its pages
  ASSERT_TRUE(a->Enqueue(Put(t, 17, *a)));
  a->Flush();
  RedisClient raw(ParseRedisUrl(server.url()).value(), testing::FastOptions());
  const std::vector<int32_t> cands{9, 17};
  // Over the genuine state at 17: a value without any MAC, then one sealed with another key, then one sealed
  // with the empty key (what a --remote-cache-trust replica writes).
  int n = 0;
  for (const auto& [value, what] : {std::pair{Forged(t, 17, "", false), "no MAC"},
                                    std::pair{Forged(t, 17, "an attacker's guess at the key"), "wrong key"},
                                    std::pair{Forged(t, 17, ""), "empty key"}}) {
    ASSERT_TRUE(raw.Put(StateKeyOf(t, 17), value).ok());
    RemoteFetch f = a->Fetch(t, cands, 0, 0);
    EXPECT_EQ(f.end, 9) << what;  // the genuine shallower state, never the planted one
    EXPECT_EQ(f.state, std::string(kStateBytes, 'a' + 9)) << what;
    EXPECT_EQ(a->Stats().unauthenticated, static_cast<uint64_t>(++n)) << what;
    EXPECT_FALSE(raw.Exists(StateKeyOf(t, 17)).value()) << what;  // deleted
  }
  EXPECT_EQ(a->Stats().hits, 3u);
}

TEST(RemoteStoreAdversarial, ReplicasWithDifferentKeysOrTrustNeverShareValues) {
  REWIND_REQUIRE_REDIS();
  RedisTestServer server;
  auto trusting = OpenStore(server.url(), Config(""));
  auto keyed = OpenStore(server.url());
  auto other = OpenStore(server.url(), Config("another deployment's key"));
  std::vector<int32_t> t = Tokens(20);
  ASSERT_TRUE(trusting->Enqueue(Put(t, 10, *trusting)));
  trusting->Flush();
  const std::vector<int32_t> cands{10};
  EXPECT_EQ(keyed->Fetch(t, cands, 0, 0).end, 0);  // another namespace: not even read
  EXPECT_EQ(other->Fetch(t, cands, 0, 0).end, 0);
  EXPECT_EQ(keyed->Stats().unauthenticated + other->Stats().unauthenticated, 0u);
  EXPECT_EQ(OpenStore(server.url(), Config(""))->Fetch(t, cands, 0, 0).end, 10);
}

TEST(RemoteStoreAdversarial, AnOversizedValueIsRejectedWithoutBeingReadWhole) {
  REWIND_REQUIRE_REDIS();
  RedisTestServer server;
  auto a = OpenStore(server.url());
  std::vector<int32_t> t = Tokens(30);
  ASSERT_TRUE(a->Enqueue(Put(t, 9, *a)));
  ASSERT_TRUE(a->Enqueue(Put(t, 17, *a)));
  a->Flush();
  RedisClient raw(ParseRedisUrl(server.url()).value(), testing::FastOptions());
  const std::string big(8 << 20, 'Z');  // 8 MiB where about 300 bytes belong
  ASSERT_TRUE(raw.Put(StateKeyOf(t, 17), big).ok());
  const std::vector<int32_t> cands{9, 17};
  RemoteFetch f = a->Fetch(t, cands, 0, 0);
  EXPECT_EQ(f.end, 9);
  EXPECT_EQ(a->Stats().oversized, 1u);
  EXPECT_LT(a->Stats().fetched_bytes, 4096u);  // what was read: the expected sizes plus one byte, not 8 MiB
  EXPECT_FALSE(raw.Exists(StateKeyOf(t, 17)).value());
}

TEST(RemoteStoreAdversarial, ALookupReadsNoMoreThanItsCap) {
  REWIND_REQUIRE_REDIS();
  RedisTestServer server;
  auto a = OpenStore(server.url());
  std::vector<int32_t> t = Tokens(200);
  ASSERT_TRUE(a->Enqueue(Put(t, 9, *a)));
  ASSERT_TRUE(a->Enqueue(Put(t, 190, *a)));
  a->Flush();
  RemoteStoreConfig c = Config();
  c.max_fetch_bytes = 1024;  // the state at 9 and its pages fit; the one at 190 (about 4.7 KB) does not
  auto b = OpenStore(server.url(), c);
  const std::vector<int32_t> cands{9, 190};
  RemoteFetch f = b->Fetch(t, cands, 0, 0);
  EXPECT_EQ(f.end, 9);
  EXPECT_LE(f.bytes, 1024);
  EXPECT_EQ(b->Stats().capped, 1u);
  EXPECT_EQ(OpenStore(server.url())->Fetch(t, cands, 0, 0).end, 190);  // under the default cap
}

TEST(RemoteStoreAdversarial, APlantedAnnouncementMakesNoReplicaWait) {
  REWIND_REQUIRE_REDIS();
  RedisTestServer server;
  RemoteStoreConfig c = Config();
  c.wait_ms = 60'000;
  auto a = OpenStore(server.url(), c);
  std::vector<int32_t> t = Tokens(30);
  ASSERT_EQ(server.Cli("set '" + StateKeyOf(t, 9) + ":coming' 1"), 0);
  const std::vector<int32_t> cands{9};
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(a->Fetch(t, cands, 0, 0).end, 0);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  EXPECT_EQ(a->Stats().waits, 0u);
  EXPECT_EQ(a->Stats().unauthenticated, 1u);
}

TEST(RemoteStoreAdversarial, ADeadRedisIsACountedErrorAndTheNextLookupIsFree) {
  REWIND_REQUIRE_REDIS();
  RedisTestServer server;
  server.Stop();
  auto a = OpenStore(server.url());
  std::vector<int32_t> t = Tokens(30);
  const std::vector<int32_t> cands{9};
  EXPECT_TRUE(a->Fetch(t, cands, 0, 0).error);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(a->Fetch(t, cands, 0, 0).error);  // backing off: no network
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(50));
  EXPECT_EQ(a->Stats().errors, 2u);
}

}  // namespace
}  // namespace rw::remote
