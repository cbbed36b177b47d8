// The remote tier over a 3-node Redis Cluster started by the test (docs/replicas.md): replicas share
// checkpoints whose values spread over the cluster's nodes, a next turn on another replica resumes from them bit
// for bit, and values changed in Redis by someone without the replicas' key are rejected, counted and never
// used, while every answer stays the one --no-cache gives. Over TLS (rediss://), the same across a cluster that
// moves slots behind the replicas' backs (they follow MOVED to its own nodes), and a replica that cannot verify
// the server counts it and serves from its own tiers.
#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "engine/collect_sink.h"
#include "engine/engine_config.h"
#include "engine/tiny_fixture.h"
#include "remote/redis_test_server.h"
#include "remote/tls_test_certs.h"

namespace rw::engine {
namespace {

constexpr auto Prompt = testing::RandomPrompt;

std::unique_ptr<Engine> Replica(const std::string& remote, bool cache = true, const remote::TlsOptions& tls = {}) {
  EngineConfig c;
  c.model_path = testing::kTinyModel;
  c.n_ctx = 2048;
  c.n_parallel = 1;
  c.n_threads = 1;
  c.n_batch = 128;
  c.cache = cache;
  c.cache_ram_mib = 64;
  c.remote_cache = remote;
  c.remote_cache_key = "the cluster's shared test key";
  c.remote_cache_tls_ca = tls.ca_file;
  c.remote_cache_tls_cert = tls.cert_file;
  c.remote_cache_tls_key = tls.key_file;
  auto e = CreateEngine(c);
  EXPECT_TRUE(e.ok()) << (e.ok() ? "" : e.error().ToString());
  return e.ok() ? std::move(e).value() : nullptr;
}

std::shared_ptr<testing::Collect> Ask(Engine& e, const std::vector<int32_t>& prompt, std::vector<int32_t> hints) {
  return testing::AskGreedy(e, prompt, std::move(hints));
}

// The next turn of a conversation: `prev`, its answer, and a new message of `extra` tokens; *answer_end is where
// the answer ends (a message start).
std::vector<int32_t> NextTurn(const std::vector<int32_t>& prev, const std::vector<int32_t>& answer, int extra,
                              uint32_t seed, int32_t* answer_end) {
  std::vector<int32_t> next = prev;
  next.insert(next.end(), answer.begin(), answer.end());
  *answer_end = static_cast<int32_t>(next.size());
  const std::vector<int32_t> more = Prompt(extra, seed);
  next.insert(next.end(), more.begin(), more.end());
  return next;
}

void Drain(Engine& e) {
  for (int i = 0; i < 300 && e.CacheJson().find("\"remote_queued_bytes\":0") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
}

long long Metric(Engine& e, const std::string& name) {
  const std::string text = e.MetricsText();
  const size_t at = text.find("\n" + name + " ");
  return at == std::string::npos ? -1 : std::stoll(text.substr(at + name.size() + 2));
}

int KeysOn(const remote::testing::RedisTestServer& node) {
  const std::string cmd = "redis-cli -p " + std::to_string(node.port()) + " dbsize";
  FILE* p = popen(cmd.c_str(), "r");
  int n = -1;
  if (p && std::fscanf(p, "%d", &n) != 1) n = -1;
  if (p) pclose(p);
  return n;
}

TEST(RemoteTierCluster, ReplicasShareCheckpointsAcrossThreeNodesAndRejectPlantedValues) {
  REWIND_REQUIRE_REDIS();
  remote::testing::RedisCluster cluster;
  ASSERT_TRUE(cluster.ok) << "could not form a 3-node cluster";
  const std::string url = cluster.nodes[2]->url();  // any node is a seed
  auto a = Replica(url);
  auto b = Replica(url);
  auto off = Replica("", false);
  ASSERT_TRUE(a && b && off);
  std::vector<int32_t> t1 = Prompt(400, 21);
  auto first = Ask(*a, t1, {0, 150, 300});
  int32_t turn2 = 0;
  const std::vector<int32_t> t2 = NextTurn(t1, first->tokens, 60, 22, &turn2);
  Drain(*a);
  // The values landed on more than one node of the cluster.
  int nodes_with_keys = 0;
  for (auto& n : cluster.nodes) nodes_with_keys += KeysOn(*n) > 0 ? 1 : 0;
  EXPECT_GE(nodes_with_keys, 2);
  auto on_b = Ask(*b, t2, {0, 150, 300, turn2});
  auto want = Ask(*off, t2, {0, 150, 300, turn2});
  EXPECT_EQ(on_b->tokens, want->tokens);
  EXPECT_EQ(on_b->logprobs, want->logprobs);
  EXPECT_EQ(on_b->done.cache.source, "remote") << on_b->done.cache.reason;
  EXPECT_GT(Metric(*b, "rewind_remote_loaded_total"), 0);
  Drain(*b);
  // Someone without the key rewrites every value on every node (a byte of each header): a fresh replica rejects
  // them all, counts them, and computes the same answer.
  for (auto& n : cluster.nodes) {
    const std::string p = std::to_string(n->port());
    ASSERT_EQ(std::system(("redis-cli -p " + p + " --scan --pattern 'rewind:*' | grep -v ':coming$' | "
                           "xargs -r -I{} redis-cli -p " + p + " setrange {} 70 XXXX >/dev/null").c_str()),
              0);
  }
  auto c = Replica(url);
  ASSERT_TRUE(c);
  auto got = Ask(*c, t2, {0, 150, 300, turn2});
  EXPECT_EQ(got->tokens, want->tokens);
  EXPECT_EQ(got->logprobs, want->logprobs);
  EXPECT_NE(got->done.cache.source, "remote");
  EXPECT_GE(Metric(*c, "rewind_remote_unauthenticated_total"), 1);
  EXPECT_EQ(Metric(*c, "rewind_remote_loaded_total"), 0);
  EXPECT_EQ(Metric(*c, "rewind_remote_redirects_refused_total"), 0);
  // It keeps serving, and shares again: the next turn on b resumes from what c wrote.
  Drain(*c);
  int32_t turn3 = 0;
  const std::vector<int32_t> t3 = NextTurn(t2, got->tokens, 40, 23, &turn3);
  auto d = Replica(url);
  ASSERT_TRUE(d);
  auto on_d = Ask(*d, t3, {0, 150, 300, turn2, turn3});
  auto want3 = Ask(*off, t3, {0, 150, 300, turn2, turn3});
  EXPECT_EQ(on_d->tokens, want3->tokens);
  EXPECT_EQ(on_d->logprobs, want3->logprobs);
  EXPECT_EQ(on_d->done.cache.source, "remote") << on_d->done.cache.reason;
}

// Node 0's slots but its last (0-5459 of 0-5460: redis-cli --cluster create gives the first node the first
// third) move to node 1. (A master that lost every slot would turn into a replica of the node that took them.)
void MoveNode0SlotsToNode1(remote::testing::RedisCluster& cluster) {
  const std::string id = cluster.nodes[1]->CliOutput("cluster myid");
  for (int n : {1, 0, 2}) {
    const std::string cmd = "seq 0 5459 | sed 's/.*/CLUSTER SETSLOT & NODE " + id + "/' | redis-cli -p " +
                            std::to_string(cluster.nodes[n]->port()) + " --pipe 2>&1 | grep -q 'errors: 0,'";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
}

TEST(RemoteTierTls, ReplicasShareCheckpointsOverTlsAcrossAClusterThatMovesSlots) {
  REWIND_REQUIRE_REDIS_TLS();
  remote::testing::TlsTestCerts certs;
  ASSERT_TRUE(certs.ok);
  remote::testing::RedisCluster cluster(certs.Server(false, /*cluster=*/true));
  ASSERT_TRUE(cluster.ok) << "could not form a 3-node cluster over TLS";
  const std::string url = cluster.nodes[0]->tls_url();
  auto a = Replica(url, true, certs.Client());
  auto b = Replica(url, true, certs.Client());
  auto off = Replica("", false);
  ASSERT_TRUE(a && b && off);
  // Both replicas read the slot map at start; now a third of the slots changes owner behind their backs, and
  // their first commands for those slots are answered MOVED to node 1, a node of the map they know.
  MoveNode0SlotsToNode1(cluster);
  std::vector<int32_t> t1 = Prompt(400, 31);
  auto first = Ask(*a, t1, {0, 150, 300});
  int32_t turn2 = 0;
  const std::vector<int32_t> t2 = NextTurn(t1, first->tokens, 60, 32, &turn2);
  Drain(*a);
  EXPECT_EQ(std::to_string(KeysOn(*cluster.nodes[0])), cluster.nodes[0]->CliOutput("cluster countkeysinslot 5460"));
  EXPECT_GT(KeysOn(*cluster.nodes[1]), 0);
  auto on_b = Ask(*b, t2, {0, 150, 300, turn2});
  auto want = Ask(*off, t2, {0, 150, 300, turn2});
  EXPECT_EQ(on_b->tokens, want->tokens);
  EXPECT_EQ(on_b->logprobs, want->logprobs);
  EXPECT_EQ(on_b->done.cache.source, "remote") << on_b->done.cache.reason;
  EXPECT_NE(cluster.nodes[0]->CliOutput("info errorstats").find("errorstat_MOVED"), std::string::npos);
  for (Engine* e : {a.get(), b.get()}) {
    EXPECT_EQ(Metric(*e, "rewind_remote_redirects_refused_total"), 0);
    EXPECT_EQ(Metric(*e, "rewind_remote_tls_failures_total"), 0);
    EXPECT_EQ(Metric(*e, "rewind_remote_errors_total"), 0);
  }
}

TEST(RemoteTierTls, AReplicaThatCannotVerifyRedisCountsItAndServesFromItsOwnTiers) {
  REWIND_REQUIRE_REDIS_TLS();
  remote::testing::TlsTestCerts certs;
  ASSERT_TRUE(certs.ok);
  remote::testing::RedisTestServer redis({}, certs.Server());
  ASSERT_TRUE(redis.running());
  auto wrong = Replica(redis.tls_url(), true, certs.Client(false, /*other=*/true));
  auto off = Replica("", false);
  ASSERT_TRUE(wrong && off);
  const std::vector<int32_t> t1 = Prompt(300, 33);
  auto got = Ask(*wrong, t1, {0, 120});
  auto want = Ask(*off, t1, {0, 120});
  EXPECT_EQ(got->tokens, want->tokens);
  EXPECT_EQ(got->logprobs, want->logprobs);
  EXPECT_GE(Metric(*wrong, "rewind_remote_tls_failures_total"), 1);
  EXPECT_GE(Metric(*wrong, "rewind_remote_errors_total"), 1);
  // Its RAM tier still serves the same prompt again.
  auto again = Ask(*wrong, t1, {0, 120});
  EXPECT_EQ(again->tokens, want->tokens);
  EXPECT_GT(again->done.cache.resume_pos, 0) << again->done.cache.reason;
  EXPECT_EQ(redis.CliOutput("dbsize"), "0");
}

}  // namespace
}  // namespace rw::engine
