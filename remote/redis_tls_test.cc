// The Redis client over TLS (rediss://) against real redis-server processes with TLS ports and certificates
// made by the test (remote/tls_test_certs.h): a round trip, servers whose certificate must be refused
// (another CA, another name, no TLS at all), a server that requires a client certificate, and a 3-node
// cluster over TLS that moves a slot behind the client's back.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "remote/redis_client.h"
#include "remote/redis_test_server.h"
#include "remote/tls_test_certs.h"

namespace rw::remote {
namespace {

using testing::RedisCluster;
using testing::RedisTestServer;
using testing::TlsTestCerts;

RedisClient TlsClient(const std::string& url, const TlsOptions& tls) {
  RedisOptions o = testing::FastOptions();
  auto ctx = TlsContext::Create(tls);
  EXPECT_TRUE(ctx.ok()) << ctx.error().message;
  o.tls = std::move(ctx).value();
  return RedisClient(ParseRedisUrl(url).value(), o);
}

void ExpectRoundTrip(RedisClient& c, const std::string& key) {
  const std::string value("tls\0value\r\n\xff", 12);
  ASSERT_TRUE(c.Put(key, value).ok());
  auto got = c.Get(key);
  ASSERT_TRUE(got.ok()) << got.error().message;
  EXPECT_EQ(got->value_or(""), value);
  EXPECT_TRUE(c.Exists(key).value());
  ASSERT_TRUE(c.Delete(key).ok());
  EXPECT_FALSE(c.Get(key)->has_value());
}

TEST(RedisTls, ARoundTripToOneServerByAddressAndByName) {
  REWIND_REQUIRE_REDIS_TLS();
  TlsTestCerts certs;
  ASSERT_TRUE(certs.ok) << "openssl could not make the test certificates: see " << certs.dir;
  RedisTestServer server({}, certs.Server());
  ASSERT_TRUE(server.running());
  for (const std::string host : {"127.0.0.1", "localhost"}) {  // an IP SAN; a DNS SAN (and SNI)
    RedisClient c = TlsClient(server.tls_url(host), certs.Client());
    ExpectRoundTrip(c, "k-" + host);
    // A pipeline larger than a TLS record and than one read.
    std::vector<std::string> keys;
    for (int i = 0; i < 40; ++i) {
      keys.push_back("big" + std::to_string(i));
      ASSERT_TRUE(c.Put(keys.back(), std::string(100'000 + i, static_cast<char>('a' + i % 26))).ok());
    }
    auto got = c.MultiGet(keys);
    ASSERT_TRUE(got.ok()) << got.error().message;
    for (int i = 0; i < 40; ++i)
      EXPECT_EQ((*got)[i].value_or(""), std::string(100'000 + i, static_cast<char>('a' + i % 26))) << i;
    EXPECT_EQ(c.tls_failures(), 0u);
    EXPECT_FALSE(c.cluster());
  }
  EXPECT_EQ(server.CliOutput("dbsize"), "40");  // written over TLS, read back over the plain port
}

// Each refusal is an error that says why, counted once per attempt, and the client then backs off.
void ExpectRefused(RedisClient& c, const std::string& why) {
  auto got = c.Get("k");
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.error().message.find(why), std::string::npos) << got.error().message;
  EXPECT_EQ(c.tls_failures(), 1u) << got.error().message;
  EXPECT_TRUE(c.backing_off());
  EXPECT_FALSE(c.Get("k").ok());
  EXPECT_EQ(c.tls_failures(), 1u);  // backing off: no second handshake
}

TEST(RedisTls, ACertificateFromAnotherCaOrForAnotherNameIsRefusedClearlyAndCounted) {
  REWIND_REQUIRE_REDIS_TLS();
  TlsTestCerts certs;
  ASSERT_TRUE(certs.ok);
  RedisTestServer server({}, certs.Server());
  RedisTestServer elsewhere({}, certs.Server(false, false, /*elsewhere=*/true));
  ASSERT_TRUE(server.running() && elsewhere.running());
  {
    RedisClient c = TlsClient(server.tls_url(), certs.Client(false, /*other=*/true));
    ExpectRefused(c, "the server's certificate did not verify");
  }
  {
    RedisClient c = TlsClient(elsewhere.tls_url(), certs.Client());
    ExpectRefused(c, "the server's certificate did not verify: IP address mismatch");
    RedisClient by_name = TlsClient(elsewhere.tls_url("localhost"), certs.Client());
    ExpectRefused(by_name, "the server's certificate did not verify: hostname mismatch");
  }
  {
    // A plain port takes the ClientHello for an inline command: it answers an error, closes, or waits for a
    // newline (then the handshake times out), depending on the hello's random bytes.
    RedisClient c = TlsClient(server.url().replace(0, 5, "rediss"), certs.Client());
    auto got = c.Get("k");
    ASSERT_FALSE(got.ok());
    EXPECT_NE(got.error().message.find("TLS handshake"), std::string::npos) << got.error().message;
  }
  EXPECT_EQ(server.CliOutput("dbsize"), "0");
}

TEST(RedisTls, AServerThatRequiresAClientCertificateServesOnlyAClientThatHasOne) {
  REWIND_REQUIRE_REDIS_TLS();
  TlsTestCerts certs;
  ASSERT_TRUE(certs.ok);
  RedisTestServer server({}, certs.Server(/*auth_clients=*/true));
  ASSERT_TRUE(server.running());
  RedisClient without = TlsClient(server.tls_url(), certs.Client());
  auto got = without.Get("k");
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.error().message.find("failed: tlsv13 alert certificate required"), std::string::npos)
      << got.error().message;
  EXPECT_EQ(without.tls_failures(), 1u);
  RedisClient with = TlsClient(server.tls_url(), certs.Client(/*with_cert=*/true));
  ExpectRoundTrip(with, "client-cert");
  EXPECT_EQ(with.tls_failures(), 0u);
}

TEST(RedisTls, AClusterOverTlsServesEveryNodeAndFollowsAMovedSlotToItsNewOwner) {
  REWIND_REQUIRE_REDIS_TLS();
  TlsTestCerts certs;
  ASSERT_TRUE(certs.ok);
  RedisCluster cluster(certs.Server(false, /*cluster=*/true));
  ASSERT_TRUE(cluster.ok) << "could not form a 3-node cluster over TLS";
  RedisClient c = TlsClient(cluster.nodes[1]->tls_url(), certs.Client());
  std::vector<std::string> keys;
  for (int i = 0; i < 30; ++i) {
    keys.push_back("ck" + std::to_string(i));
    ASSERT_TRUE(c.Put(keys.back(), "v" + std::to_string(i)).ok()) << i;
  }
  EXPECT_TRUE(c.cluster());
  auto got = c.MultiGet(keys);
  ASSERT_TRUE(got.ok()) << got.error().message;
  for (int i = 0; i < 30; ++i) EXPECT_EQ((*got)[i].value_or(""), "v" + std::to_string(i));
  for (auto& n : cluster.nodes) EXPECT_NE(n->CliOutput("dbsize"), "0");
  // The slot of a new key moves to another node behind the client's back: its slot map is now stale, and the
  // old owner answers MOVED with the new owner's TLS address, a node of the map.
  const std::string key = "moved-key";
  size_t owner = 0;
  while (owner < 3 && cluster.nodes[owner]->CliOutput("get " + key).starts_with("MOVED")) ++owner;
  ASSERT_LT(owner, 3u);
  const size_t target = (owner + 1) % 3;
  const std::string id = cluster.nodes[target]->CliOutput("cluster myid");
  for (size_t n : {target, owner, (owner + 2) % 3})
    ASSERT_EQ(cluster.nodes[n]->CliOutput("cluster setslot " + std::to_string(KeySlot(key)) + " node " + id),
              "OK");
  ASSERT_TRUE(c.Put(key, "moved").ok());
  EXPECT_EQ(c.Get(key)->value_or(""), "moved");
  EXPECT_EQ(cluster.nodes[target]->CliOutput("get " + key), "moved");
  EXPECT_NE(cluster.nodes[owner]->CliOutput("info errorstats").find("errorstat_MOVED"), std::string::npos);
  EXPECT_EQ(c.redirects_refused(), 0u);
  EXPECT_EQ(c.tls_failures(), 0u);
}

}  // namespace
}  // namespace rw::remote
