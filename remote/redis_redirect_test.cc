// Cluster redirects against fake Redis nodes (remote/fake_redis.h): a MOVED or ASK is followed only to a node of
// the cluster's own slot map, and the URL's password never reaches any other host; a reply longer than the cap
// is not read whole.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>

#include "remote/fake_redis.h"
#include "remote/redis_client.h"
#include "remote/redis_test_server.h"

namespace rw::remote {
namespace {

using testing::FakeRedis;

// CLUSTER SLOTS: one range per (lo, hi, port) on 127.0.0.1.
std::string SlotMap(const std::vector<std::tuple<int, int, int>>& ranges) {
  std::string r = "*" + std::to_string(ranges.size()) + "\r\n";
  for (const auto& [lo, hi, port] : ranges)
    r += "*3\r\n" + FakeRedis::Int(lo) + FakeRedis::Int(hi) + "*3\r\n" + FakeRedis::Bulk("127.0.0.1") +
         FakeRedis::Int(port) + FakeRedis::Bulk("node" + std::to_string(port)) ;
  return r;
}

bool SawAuth(const FakeRedis& r) {
  const auto got = r.received();
  return std::any_of(got.begin(), got.end(), [](const auto& a) { return !a.empty() && a[0] == "AUTH"; });
}

// A key whose slot is below 8192 (served by the first of two nodes).
std::string LowSlotKey() {
  for (int i = 0;; ++i)
    if (KeySlot("k" + std::to_string(i)) < 8192) return "k" + std::to_string(i);
}

TEST(RedisRedirect, ARedirectToAHostOutsideTheSlotMapIsRefusedAndThePasswordStaysHome) {
  for (const std::string kind : {"MOVED", "ASK"}) {
    FakeRedis foreign;
    foreign.Serve([](const FakeRedis::Args&) { return std::string("+OK\r\n"); });
    FakeRedis node;
    node.Serve([&](const FakeRedis::Args& a) -> std::string {
      if (a[0] == "CLUSTER") return SlotMap({{0, 16383, node.port()}});
      if (a[0] == "GET") return "-" + kind + " 12182 127.0.0.1:" + std::to_string(foreign.port()) + "\r\n";
      return "+OK\r\n";
    });
    RedisClient c(ParseRedisUrl(node.url("secret")).value(), testing::FastOptions());
    auto got = c.Get("foo");
    ASSERT_FALSE(got.ok()) << kind;
    EXPECT_NE(got.error().message.find("refused"), std::string::npos) << got.error().message;
    EXPECT_EQ(c.redirects_refused(), 1u) << kind;
    EXPECT_EQ(foreign.connections(), 0) << kind;  // never contacted, so never sent the password
    EXPECT_FALSE(SawAuth(foreign));
    EXPECT_TRUE(SawAuth(node));
  }
}

TEST(RedisRedirect, AServerOutsideAClusterNeverRedirects) {
  FakeRedis foreign;
  foreign.Serve([](const FakeRedis::Args&) { return std::string("+OK\r\n"); });
  FakeRedis single;
  single.Serve([&](const FakeRedis::Args& a) -> std::string {
    if (a[0] == "CLUSTER") return "-ERR This instance has cluster support disabled\r\n";
    if (a[0] == "GET") return "-MOVED 1 127.0.0.1:" + std::to_string(foreign.port()) + "\r\n";
    return "+OK\r\n";
  });
  RedisClient c(ParseRedisUrl(single.url("secret")).value(), testing::FastOptions());
  EXPECT_FALSE(c.Get("foo").ok());
  EXPECT_EQ(c.redirects_refused(), 1u);
  EXPECT_EQ(foreign.connections(), 0);
}

TEST(RedisRedirect, ARedirectToANodeOfTheSlotMapIsFollowed) {
  FakeRedis b;
  FakeRedis a;
  const std::string key = LowSlotKey();
  a.Serve([&](const FakeRedis::Args& args) -> std::string {
    if (args[0] == "CLUSTER") return SlotMap({{0, 8191, a.port()}, {8192, 16383, b.port()}});
    if (args[0] == "GET") return "-MOVED " + std::to_string(KeySlot(key)) + " 127.0.0.1:" + std::to_string(b.port()) + "\r\n";
    return "+OK\r\n";
  });
  b.Serve([&](const FakeRedis::Args& args) -> std::string {
    if (args[0] == "CLUSTER") return SlotMap({{0, 8191, a.port()}, {8192, 16383, b.port()}});
    if (args[0] == "GET") return FakeRedis::Bulk("from b");
    return "+OK\r\n";
  });
  RedisClient c(ParseRedisUrl(a.url("secret")).value(), testing::FastOptions());
  auto got = c.Get(key);
  ASSERT_TRUE(got.ok()) << got.error().message;
  EXPECT_EQ(got->value_or(""), "from b");
  EXPECT_EQ(c.redirects_refused(), 0u);
  EXPECT_TRUE(SawAuth(b));  // a member of the cluster gets the password like the seed
}

TEST(RedisClient, AReplyLongerThanTheCapFailsBeforeItIsReadWhole) {
  // A server that answers a GET with a 1 GB string (it sends 4 MB of it and would go on).
  FakeRedis huge;
  const std::string start = "$1000000000\r\n" + std::string(4 << 20, 'x');
  huge.Serve([&](const FakeRedis::Args& a) -> std::string {
    if (a[0] == "CLUSTER") return "-ERR This instance has cluster support disabled\r\n";
    return a[0] == "GET" ? start : "+OK\r\n";
  });
  RedisOptions o = testing::FastOptions();
  o.max_reply_bytes = 1 << 20;
  RedisClient c(ParseRedisUrl(huge.url()).value(), o);
  const auto t0 = std::chrono::steady_clock::now();
  auto got = c.Get("k");
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.error().message.find("a reply longer than 1048576 bytes"), std::string::npos) << got.error().message;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(400));  // not the command timeout
  EXPECT_TRUE(c.backing_off());
}

TEST(RedisUrl, ParsesTlsUrls) {
  auto u = ParseRedisUrl("rediss://:pw@cache.example:6380/2");
  ASSERT_TRUE(u.ok()) << u.error().message;
  EXPECT_TRUE(u->tls);
  EXPECT_EQ(u->host, "cache.example");
  EXPECT_EQ(u->port, 6380);
  EXPECT_EQ(u->db, 2);
  EXPECT_EQ(u->password, "pw");
  EXPECT_EQ(u->ToString(), "rediss://cache.example:6380/2");
  EXPECT_FALSE(ParseRedisUrl("redis://cache.example")->tls);
  EXPECT_FALSE(ParseRedisUrl("redisss://cache.example").ok());
}

}  // namespace
}  // namespace rw::remote
