// The remote tier over a 3-node Redis Cluster started by the test (docs/replicas.md): replicas share
// checkpoints whose values spread over the cluster's nodes, a next turn on another replica resumes from them bit
// for bit, and values changed in Redis by someone without the replicas' key are rejected, counted and never
// used, while every answer stays the one --no-cache gives.
#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "engine/collect_sink.h"
#include "engine/engine_config.h"
#include "engine/tiny_fixture.h"
#include "remote/redis_test_server.h"

namespace rw::engine {
namespace {

constexpr auto Prompt = testing::RandomPrompt;

std::unique_ptr<Engine> Replica(const std::string& remote, bool cache = true) {
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
  auto e = CreateEngine(c);
  EXPECT_TRUE(e.ok()) << (e.ok() ? "" : e.error().ToString());
  return e.ok() ? std::move(e).value() : nullptr;
}

std::shared_ptr<testing::Collect> Ask(Engine& e, const std::vector<int32_t>& prompt, std::vector<int32_t> hints) {
  return testing::AskGreedy(e, prompt, std::move(hints));
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
  std::vector<int32_t> t2 = t1;
  t2.insert(t2.end(), first->tokens.begin(), first->tokens.end());
  const int32_t turn2 = static_cast<int32_t>(t2.size());
  const std::vector<int32_t> more = Prompt(60, 22);
  t2.insert(t2.end(), more.begin(), more.end());
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
  std::vector<int32_t> t3 = t2;
  t3.insert(t3.end(), got->tokens.begin(), got->tokens.end());
  const int32_t turn3 = static_cast<int32_t>(t3.size());
  const std::vector<int32_t> last = Prompt(40, 23);
  t3.insert(t3.end(), last.begin(), last.end());
  auto d = Replica(url);
  ASSERT_TRUE(d);
  auto on_d = Ask(*d, t3, {0, 150, 300, turn2, turn3});
  auto want3 = Ask(*off, t3, {0, 150, 300, turn2, turn3});
  EXPECT_EQ(on_d->tokens, want3->tokens);
  EXPECT_EQ(on_d->logprobs, want3->logprobs);
  EXPECT_EQ(on_d->done.cache.source, "remote") << on_d->done.cache.reason;
}

}  // namespace
}  // namespace rw::engine
