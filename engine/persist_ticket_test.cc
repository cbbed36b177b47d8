// A finished request's end state is in the disk tier when its PersistTicket says so (engine/engine.h): a fresh
// engine on the folder as kill -9 leaves it at that moment resumes the next turn from that state, reading it
// from disk. What the server waits for before a response's last event (--cache-disk-wait).
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>

#include "engine/collect_sink.h"
#include "engine/engine_config.h"
#include "engine/tiny_fixture.h"
#include "memory/store_test_util.h"

namespace rw::engine {
namespace {

std::unique_ptr<Engine> DiskEngine(const std::string& dir, bool cache = true) {
  EngineConfig c;
  c.model_path = testing::kTinyModel;
  c.n_ctx = 4096;
  c.n_parallel = 1;
  c.n_threads = 1;
  c.n_batch = 128;
  c.kv_type = "f32";
  c.cache = cache;
  c.cache_dir = dir;
  auto e = CreateEngine(c);
  EXPECT_TRUE(e.ok()) << (e.ok() ? "" : e.error().ToString());
  return e.ok() ? std::move(e).value() : nullptr;
}

class PersistTicketTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/rewind_ticket_" + std::to_string(getpid());
    std::filesystem::remove_all(dir_);
    std::filesystem::remove_all(dir_ + "-crashed");
  }
  void TearDown() override {
    std::filesystem::remove_all(dir_);
    std::filesystem::remove_all(dir_ + "-crashed");
  }
  std::string dir_;
};

TEST_F(PersistTicketTest, TheEndStateIsOnDiskForARestartWhenTheTicketSaysSo) {
  const std::vector<int32_t> prompt = testing::RandomPrompt(300, 7);
  std::vector<int32_t> next = prompt;
  int32_t end = 0;
  {
    auto e = DiskEngine(dir_);
    ASSERT_TRUE(e);
    auto first = testing::AskGreedy(*e, prompt, {}, 8);
    ASSERT_TRUE(first->done.persist) << "the end state was not queued for the disk tier";
    end = first->done.persist->position();
    EXPECT_EQ(end, 300 + 8 - 1);  // the last generated token is not evaluated
    ASSERT_EQ(first->done.persist->Wait(std::chrono::seconds(60)), PersistTicket::Outcome::kVisible);
    memory::testing::CopyAsACrashLeavesIt(dir_, dir_ + "-crashed");
    next.insert(next.end(), first->tokens.begin(), first->tokens.end());
  }  // (the engine's shutdown writes what is still queued into dir_, not into the copy)
  const std::vector<int32_t> user = testing::RandomPrompt(20, 8);
  next.insert(next.end(), user.begin(), user.end());
  auto e = DiskEngine(dir_ + "-crashed");
  ASSERT_TRUE(e);
  auto second = testing::AskGreedy(*e, next, {}, 2);
  EXPECT_EQ(second->done.cached_tokens, end);
  EXPECT_NE(second->done.cache.reason.find("disk tier"), std::string::npos) << second->done.cache.reason;
}

TEST_F(PersistTicketTest, NoTicketWithoutTheDiskTierOrTheCache) {
  const std::vector<int32_t> prompt = testing::RandomPrompt(100, 9);
  auto no_disk = DiskEngine("");
  ASSERT_TRUE(no_disk);
  EXPECT_FALSE(testing::AskGreedy(*no_disk, prompt, {}, 2)->done.persist);
  auto no_cache = DiskEngine(dir_, /*cache=*/false);
  ASSERT_TRUE(no_cache);
  EXPECT_FALSE(testing::AskGreedy(*no_cache, prompt, {}, 2)->done.persist);
}

}  // namespace
}  // namespace rw::engine
