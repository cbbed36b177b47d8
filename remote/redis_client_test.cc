#include "remote/redis_client.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>

#include "remote/redis_test_server.h"

namespace rw::remote {
namespace {

using testing::RedisTestServer;

RedisClient ClientFor(const std::string& url) {
  return RedisClient(ParseRedisUrl(url).value(), testing::FastOptions());
}

void WaitBackoff() { std::this_thread::sleep_for(std::chrono::milliseconds(250)); }

TEST(RedisUrl, ParsesHostPortDatabaseAndPassword) {
  auto u = ParseRedisUrl("redis://:secret@10.0.0.5:6380/3");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "10.0.0.5");
  EXPECT_EQ(u->port, 6380);
  EXPECT_EQ(u->db, 3);
  EXPECT_EQ(u->password, "secret");
  EXPECT_EQ(u->ToString(), "redis://10.0.0.5:6380/3");
  auto d = ParseRedisUrl("redis://localhost");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->port, 6379);
  EXPECT_EQ(d->db, 0);
}

TEST(RedisUrl, RejectsMalformedUrls) {
  for (const char* bad :
       {"http://x:1", "redis://", "redis://h:99999", "redis://h:12ab", "redis://h:1/x", "h:1"}) {
    EXPECT_FALSE(ParseRedisUrl(bad).ok()) << bad;
  }
}

TEST(KeySlot, UsesTheHashTagOnly) {
  EXPECT_EQ(KeySlot("{user1000}.following"), KeySlot("{user1000}.followers"));
  EXPECT_EQ(KeySlot("a{}b"), KeySlot("a{}b"));  // an empty tag hashes the whole key
  EXPECT_NE(KeySlot("a{}b"), KeySlot(""));
  EXPECT_EQ(KeySlot("foo"), 12182);  // the value Redis' documentation gives for CLUSTER KEYSLOT foo
}

TEST(RedisClient, StoresBinaryValuesAndDeletesThem) {
  REWIND_REQUIRE_REDIS();
  RedisTestServer server;
  ASSERT_TRUE(server.running());
  RedisClient c = ClientFor(server.url());
  std::string value("a\0b\r\n\xff", 6);
  ASSERT_TRUE(c.Put("k1", value).ok());
  auto got = c.Get("k1");
  ASSERT_TRUE(got.ok());
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ(**got, value);
  EXPECT_TRUE(c.Exists("k1").value());
  ASSERT_TRUE(c.Delete("k1").ok());
  EXPECT_FALSE(c.Exists("k1").value());
  EXPECT_FALSE(c.Get("k1")->has_value());
  EXPECT_FALSE(c.cluster());
}

TEST(RedisClient, PipelinedMultiGetKeepsTheOrderAndReportsMissingKeys) {
  REWIND_REQUIRE_REDIS();
  RedisTestServer server;
  RedisClient c = ClientFor(server.url());
  std::vector<std::string> keys;
  for (int i = 0; i < 50; ++i) {
    keys.push_back("mk" + std::to_string(i));
    if (i % 3 != 0) {
      ASSERT_TRUE(c.Put(keys.back(), "v" + std::to_string(i)).ok());
    }
  }
  auto got = c.MultiGet(keys);
  ASSERT_TRUE(got.ok());
  for (int i = 0; i < 50; ++i) {
    if (i % 3 == 0) {
      EXPECT_FALSE((*got)[i].has_value()) << i;
    } else {
      EXPECT_EQ((*got)[i].value_or(""), "v" + std::to_string(i));
    }
  }
}

TEST(RedisClient, ExpirySetsATimeToLive) {
  REWIND_REQUIRE_REDIS();
  RedisTestServer server;
  RedisClient c = ClientFor(server.url());
  ASSERT_TRUE(c.Put("ttl", "x", 100).ok());
  ASSERT_TRUE(c.Put("no-ttl", "x").ok());
  // TTL answers -1 for a key without expiry and the seconds left for one with: check through redis-cli.
  EXPECT_EQ(
      std::system(("test \"$(redis-cli -p " + std::to_string(server.port()) + " ttl ttl)\" -gt 90").c_str()),
      0);
  EXPECT_EQ(
      std::system(("test \"$(redis-cli -p " + std::to_string(server.port()) + " ttl no-ttl)\" = -1").c_str()),
      0);
}

TEST(RedisClient, SelectsTheDatabaseOfTheUrl) {
  REWIND_REQUIRE_REDIS();
  RedisTestServer server;
  RedisClient db0 = ClientFor(server.url());
  RedisClient db2 = ClientFor(server.url() + "/2");
  ASSERT_TRUE(db2.Put("k", "two").ok());
  EXPECT_FALSE(db0.Get("k")->has_value());
  EXPECT_EQ(db2.Get("k")->value_or(""), "two");
}

TEST(RedisClient, ADeadServerIsAnErrorThenBackOffThenRecovery) {
  REWIND_REQUIRE_REDIS();
  RedisTestServer server;
  server.Stop();
  RedisClient c = ClientFor(server.url());
  auto first = c.Get("k");
  ASSERT_FALSE(first.ok());
  EXPECT_EQ(first.error().kind, ErrorKind::kUnavailable);
  EXPECT_TRUE(c.backing_off());
  // While backing off, calls fail at once without touching the network.
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(c.Put("k", "v").ok());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(50));
  ASSERT_TRUE(server.Start());
  WaitBackoff();
  EXPECT_TRUE(c.Put("k", "v").ok());
  EXPECT_FALSE(c.backing_off());
}

TEST(RedisClient, ARestartedServerIsReconnectedAndItsLostKeysAreMisses) {
  REWIND_REQUIRE_REDIS();
  RedisTestServer server;
  RedisClient c = ClientFor(server.url());
  ASSERT_TRUE(c.Put("k", "v").ok());
  server.Stop();
  ASSERT_TRUE(server.Start());  // no persistence: the restarted server is empty
  auto after = c.Get("k");      // the old connection is torn: an error, then back-off
  if (!after.ok()) {
    WaitBackoff();
    after = c.Get("k");
  }
  ASSERT_TRUE(after.ok()) << after.error().message;
  EXPECT_FALSE(after->has_value());
}

TEST(RedisClient, AFullServerRefusesWritesWithoutBackingOff) {
  REWIND_REQUIRE_REDIS();
  RedisTestServer server({"--maxmemory", "2mb", "--maxmemory-policy", "noeviction"});
  RedisClient c = ClientFor(server.url());
  std::string big(256 << 10, 'x');
  Status last;
  for (int i = 0; i < 40 && last.ok(); ++i) last = c.Put("big" + std::to_string(i), big);
  ASSERT_FALSE(last.ok());
  EXPECT_EQ(last.error().kind, ErrorKind::kResourceExhausted);
  EXPECT_FALSE(c.backing_off());
  EXPECT_TRUE(c.Get("big0").ok());  // reads still work
}

TEST(RedisClient, AHungServerTimesOut) {
  REWIND_REQUIRE_REDIS();
  RedisTestServer server;
  RedisClient c = ClientFor(server.url());
  ASSERT_TRUE(c.Put("k", "v").ok());
  server.Pause();
  auto t0 = std::chrono::steady_clock::now();
  auto got = c.Get("k");
  auto took = std::chrono::steady_clock::now() - t0;
  server.Resume();
  EXPECT_FALSE(got.ok());
  EXPECT_LT(took, std::chrono::seconds(5));  // the command timeout (500 ms), not forever
  WaitBackoff();
  EXPECT_EQ(c.Get("k")->value_or(""), "v");
}

using testing::RedisCluster;

TEST(RedisClient, WorksAgainstARedisClusterWithKeysOnEveryNode) {
  REWIND_REQUIRE_REDIS();
  RedisCluster cluster;
  ASSERT_TRUE(cluster.ok) << "could not form a 3-node cluster";
  RedisClient c = ClientFor(cluster.nodes[1]->url());  // any node is a seed
  std::vector<std::string> keys;
  for (int i = 0; i < 60; ++i) {
    keys.push_back("ck" + std::to_string(i));
    ASSERT_TRUE(c.Put(keys.back(), "v" + std::to_string(i)).ok()) << i;
  }
  EXPECT_TRUE(c.cluster());
  auto got = c.MultiGet(keys);
  ASSERT_TRUE(got.ok());
  for (int i = 0; i < 60; ++i) EXPECT_EQ((*got)[i].value_or(""), "v" + std::to_string(i));
  // Our slot function agrees with the cluster's, and every node holds some keys.
  for (int i = 0; i < 60; i += 7) {
    std::string cmd = "test \"$(redis-cli -p " + std::to_string(cluster.nodes[0]->port()) +
                      " cluster keyslot " + keys[i] + ")\" = " + std::to_string(KeySlot(keys[i]));
    EXPECT_EQ(std::system(cmd.c_str()), 0) << keys[i];
  }
  for (auto& n : cluster.nodes) {
    std::string cmd = "test \"$(redis-cli -p " + std::to_string(n->port()) + " dbsize)\" -gt 0";
    EXPECT_EQ(std::system(cmd.c_str()), 0);
  }
  ASSERT_TRUE(c.Delete(keys[0]).ok());
  EXPECT_FALSE(c.Get(keys[0])->has_value());
  // A cluster has only database 0.
  RedisClient db1 = ClientFor(cluster.nodes[0]->url() + "/1");
  EXPECT_FALSE(db1.Get("k").ok());
}

}  // namespace
}  // namespace rw::remote
