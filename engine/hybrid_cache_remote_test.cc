// The remote tier across replicas (docs/replicas.md), on the tiny fixture model and a real redis-server
// started by the test: a conversation whose next turn lands on another replica resumes there from the
// checkpoint the first replica wrote, with tokens and logprobs bit-identical to --no-cache (I1); a dead,
// flushed, corrupted, hung or full Redis only costs compute, never a wrong or failed answer.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <random>
#include <thread>

#include "engine/collect_sink.h"
#include "engine/tiny_fixture.h"
#include "engine/engine_config.h"
#include "remote/redis_test_server.h"

namespace rw::engine {
namespace {

const std::string& kModel = testing::kTinyModel;
constexpr auto Prompt = testing::RandomPrompt;

std::unique_ptr<Engine> Replica(const std::string& remote, bool cache = true) {
  EngineConfig c;
  c.model_path = kModel;
  c.n_ctx = 2048;
  c.n_parallel = 1;
  c.n_threads = 1;
  c.n_batch = 128;
  c.cache = cache;
  c.cache_ram_mib = 64;
  c.remote_cache = remote;  // no disk tier: cache_dir stays ""
  c.remote_cache_key = "the replicas' shared test key";
  auto e = CreateEngine(c);
  EXPECT_TRUE(e.ok()) << (e.ok() ? "" : e.error().ToString());
  return e.ok() ? std::move(e).value() : nullptr;
}

struct Turn {
  std::vector<int32_t> prompt;
  std::vector<int32_t> hints;
};

std::shared_ptr<testing::Collect> Ask(Engine& e, const Turn& t, int n = 6) {
  return testing::AskGreedy(e, t.prompt, t.hints, n);
}

// Turn 2 appends the first answer and a new message to turn 1, like a chat client.
Turn NextTurn(const Turn& t1, const std::vector<int32_t>& answer, int extra, uint32_t seed) {
  Turn t2 = t1;
  t2.prompt.insert(t2.prompt.end(), answer.begin(), answer.end());
  t2.hints.push_back(static_cast<int32_t>(t2.prompt.size()));
  const std::vector<int32_t> more = Prompt(extra, seed);
  t2.prompt.insert(t2.prompt.end(), more.begin(), more.end());
  return t2;
}

TEST(RemoteTier, ANextTurnOnAnotherReplicaResumesThereBitForBit) {
  REWIND_REQUIRE_REDIS();
  remote::testing::RedisTestServer redis;
  auto a = Replica(redis.url());
  auto b = Replica(redis.url());
  auto off = Replica("", false);
  ASSERT_TRUE(a && b && off);
  Turn t1{Prompt(300, 1), {0, 120}};
  auto first = Ask(*a, t1);
  const Turn t2 = NextTurn(t1, first->tokens, 90, 2);
  // Replica A's writer is asynchronous: wait until its checkpoints are in Redis.
  for (int i = 0; i < 200 && a->CacheJson().find("\"remote_queued_bytes\":0") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto on_b = Ask(*b, t2);
  auto want = Ask(*off, t2);
  EXPECT_EQ(on_b->tokens, want->tokens);
  EXPECT_EQ(on_b->logprobs, want->logprobs);
  EXPECT_EQ(on_b->done.cache.source, "remote") << on_b->done.cache.reason;
  // It resumed at the end of turn 1's evaluated tokens (prompt + answer but its last token).
  EXPECT_EQ(on_b->done.cache.resume_pos, static_cast<int32_t>(t1.prompt.size() + first->tokens.size()) - 1);
  EXPECT_GT(on_b->done.cache.remote_bytes, 0);
  EXPECT_NE(b->MetricsText().find("rewind_remote_loaded_total 1"), std::string::npos) << b->MetricsText();
  // Turn 3 back on A: its own RAM serves turn 2's start, the rest from what B wrote.
  const Turn t3 = NextTurn(t2, on_b->tokens, 40, 3);
  for (int i = 0; i < 200 && b->CacheJson().find("\"remote_queued_bytes\":0") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto on_a = Ask(*a, t3);
  auto want3 = Ask(*off, t3);
  EXPECT_EQ(on_a->tokens, want3->tokens);
  EXPECT_EQ(on_a->logprobs, want3->logprobs);
  EXPECT_EQ(on_a->done.cache.source, "remote") << on_a->done.cache.reason;
}

TEST(RemoteTier, ADeadFlushedOrCorruptRedisOnlyCostsCompute) {
  REWIND_REQUIRE_REDIS();
  remote::testing::RedisTestServer redis;
  auto a = Replica(redis.url());
  auto off = Replica("", false);
  ASSERT_TRUE(a && off);
  // Dead: the replica answers, from its own RAM and by computing.
  redis.Stop();
  Turn t1{Prompt(200, 5), {0, 80}};
  auto first = Ask(*a, t1);
  auto want1 = Ask(*off, t1);
  EXPECT_EQ(first->tokens, want1->tokens);
  EXPECT_EQ(first->logprobs, want1->logprobs);
  // Back, then flushed: a fresh replica finds nothing and computes, with the same answer.
  ASSERT_TRUE(redis.Start());
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  Turn t2 = NextTurn(t1, first->tokens, 50, 6);
  auto b = Replica(redis.url());
  ASSERT_TRUE(b);
  auto got = Ask(*b, t2);
  auto want2 = Ask(*off, t2);
  EXPECT_EQ(got->tokens, want2->tokens);
  EXPECT_EQ(got->logprobs, want2->logprobs);
  EXPECT_NE(got->done.cache.source, "remote");
  // Every value in Redis corrupted (a torn write, another model's data under our keys): never used.
  ASSERT_EQ(std::system(("redis-cli -p " + std::to_string(redis.port()) +
                         " --scan --pattern 'rewind:*' | xargs -r -n1 -I{} redis-cli -p " +
                         std::to_string(redis.port()) + " setrange {} 70 XXXX >/dev/null")
                            .c_str()),
            0);
  auto c = Replica(redis.url());
  ASSERT_TRUE(c);
  Turn t3 = NextTurn(t2, got->tokens, 30, 7);
  auto got3 = Ask(*c, t3);
  auto want3 = Ask(*off, t3);
  EXPECT_EQ(got3->tokens, want3->tokens);
  EXPECT_EQ(got3->logprobs, want3->logprobs);
  EXPECT_NE(got3->done.cache.source, "remote");
}

TEST(RemoteTier, AHungOrFullRedisOnlyCostsCompute) {
  REWIND_REQUIRE_REDIS();
  // Full: a maxmemory below what Redis itself uses, without eviction: every write is refused.
  remote::testing::RedisTestServer redis({"--maxmemory", "1", "--maxmemory-policy", "noeviction"});
  auto a = Replica(redis.url());
  auto off = Replica("", false);
  ASSERT_TRUE(a && off);
  Turn t1{Prompt(200, 8), {0, 80}};
  auto first = Ask(*a, t1);
  auto want1 = Ask(*off, t1);
  EXPECT_EQ(first->tokens, want1->tokens);
  EXPECT_EQ(first->logprobs, want1->logprobs);
  for (int i = 0; i < 200 && a->CacheJson().find("\"remote_queued_bytes\":0") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(a->MetricsText().find("rewind_remote_write_errors_total 0"), std::string::npos) << a->MetricsText();
  // Hung (stopped, not closed): the lookup times out on the request's thread, the request is computed.
  redis.Pause();
  auto b = Replica(redis.url());
  ASSERT_TRUE(b);
  const Turn t2 = NextTurn(t1, first->tokens, 40, 9);
  auto got = Ask(*b, t2);
  redis.Resume();
  auto want2 = Ask(*off, t2);
  EXPECT_EQ(got->tokens, want2->tokens);
  EXPECT_EQ(got->logprobs, want2->logprobs);
  EXPECT_NE(got->done.cache.source, "remote");
  EXPECT_EQ(b->MetricsText().find("rewind_remote_errors_total 0"), std::string::npos) << b->MetricsText();
}

TEST(RemoteTier, AnUnauthenticatedRemoteCacheIsRefusedUnlessTrustedAndTlsFlagsAreChecked) {
  EngineConfig c;
  c.model_path = kModel;
  c.remote_cache = "redis://127.0.0.1:6379";
  auto refused = c.Validate();
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("--remote-cache-trust"), std::string::npos) << refused.error().message;
  c.remote_cache_trust = true;
  EXPECT_TRUE(c.Validate().ok());
  c.remote_cache_key = "short";
  EXPECT_FALSE(c.Validate().ok());  // a key contradicts trust, and is too short
  c.remote_cache_trust = false;
  EXPECT_FALSE(c.Validate().ok());
  // A key file: one trailing newline is not part of the key.
  const std::string file = ::testing::TempDir() + "/rewind_remote_key_" + std::to_string(getpid());
  ASSERT_EQ(std::system(("printf 'sixteen-byte-key-and-more\\n' > " + file).c_str()), 0);
  c.remote_cache_key.clear();
  c.remote_cache_key_file = file;
  ASSERT_TRUE(c.Validate().ok());
  auto key = c.RemoteCacheKey();
  ASSERT_TRUE(key.ok()) << key.error().message;
  EXPECT_EQ(*key, "sixteen-byte-key-and-more");
  std::remove(file.c_str());
  EXPECT_FALSE(c.RemoteCacheKey().ok());  // unreadable: a clear error at start
  // TLS: its flags need a rediss:// URL, readable files, and a client certificate comes with its key.
  c.remote_cache_tls_ca = "/nonexistent/ca.pem";
  auto plain = c.Validate();
  ASSERT_FALSE(plain.ok());
  EXPECT_NE(plain.error().message.find("rediss://"), std::string::npos) << plain.error().message;
  c.remote_cache = "rediss://127.0.0.1:6380";
  auto unreadable = c.Validate();
  ASSERT_FALSE(unreadable.ok());
  EXPECT_NE(unreadable.error().message.find("--remote-cache-tls-ca"), std::string::npos) << unreadable.error().message;
  c.remote_cache_tls_ca.clear();  // the system's CA store
  c.remote_cache_key = "sixteen-byte-key-and-more";
  c.remote_cache_key_file.clear();
  EXPECT_TRUE(c.Validate().ok());
  c.remote_cache_tls_cert = kModel;  // any readable file: Validate checks presence, TLS loading checks the rest
  auto lone = c.Validate();
  ASSERT_FALSE(lone.ok());
  EXPECT_NE(lone.error().message.find("--remote-cache-tls-key"), std::string::npos) << lone.error().message;
  c.remote_cache_tls_key = kModel;
  EXPECT_TRUE(c.Validate().ok());
}

}  // namespace
}  // namespace rw::engine
