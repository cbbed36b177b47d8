// GET /cache/tree's JSON (HybridCache::TreeJson through Engine::CacheTreeJson) on the tiny fixture model: two
// prompts sharing a prefix make a branch; nodes chain, checkpoints sit at node ends, the disk tier is flagged.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <chrono>
#include <map>
#include <thread>
#include <nlohmann/json.hpp>
#include <random>

#include "engine/collect_sink.h"
#include "engine/engine_config.h"

namespace rw::engine {
namespace {

std::vector<int32_t> Tokens(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (auto& t : p) t = static_cast<int32_t>(rng() % 3900);
  return p;
}

TEST(CacheTreeJson, ShowsABranchWithCheckpointsAtNodeEndsAndTheirDiskFiles) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("rewind-tree-json-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  EngineConfig c;
  c.model_path = std::string(REWIND_TEST_DATA) + "/golden/models/tiny-qwen35-f32.gguf";
  c.n_ctx = 1024;
  c.n_parallel = 1;
  c.n_threads = 1;
  c.cache_ram_mib = 64;
  c.cache_dir = dir.string();
  auto e = CreateEngine(c);
  ASSERT_TRUE(e.ok()) << e.error().ToString();
  const std::vector<int32_t> shared = Tokens(70, 1);
  for (uint32_t seed : {2u, 3u}) {
    GenerationRequest r;
    r.prompt = shared;
    const auto tail = Tokens(30, seed);
    r.prompt.insert(r.prompt.end(), tail.begin(), tail.end());
    r.max_tokens = 3;
    r.sampling.temperature = 0;
    auto sink = std::make_shared<testing::Collect>();
    ASSERT_TRUE((*e)->Submit(r, sink).ok());
    sink->Wait();
    ASSERT_FALSE(sink->done.error.has_value());
  }
  // The disk tier's writer is asynchronous (docs/checkpoints.md): wait until it has written a state.
  auto tree = nlohmann::json::parse((*e)->CacheTreeJson());
  for (int i = 0; i < 200 && tree["disk_files"].get<int>() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
    tree = nlohmann::json::parse((*e)->CacheTreeJson());
  }
  ASSERT_TRUE(tree["nodes"].is_array());
  EXPECT_EQ(tree["nodes"].size(), tree["nodes_total"].get<size_t>());
  std::map<int, nlohmann::json> by_id;
  for (const auto& n : tree["nodes"]) by_id[n["id"].get<int>()] = n;
  std::map<int, int> children;
  int checkpoints = 0, on_disk = 0;
  for (const auto& [id, n] : by_id) {
    const int parent = n["parent"].get<int>();
    const int parent_end = parent == 0 ? 0 : by_id.at(parent)["end"].get<int>();
    EXPECT_EQ(n["start"].get<int>(), parent_end) << "node " << id << " does not continue its parent";
    EXPECT_GT(n["end"].get<int>(), n["start"].get<int>());
    ++children[parent];
    if (!n["ckpt"].is_null()) {
      ++checkpoints;
      EXPECT_EQ(n["ckpt"]["pos"], n["end"]) << "a node's checkpoint is the state at its end";
      EXPECT_GT(n["ckpt"]["bytes"].get<int64_t>(), 0);
      on_disk += n["ckpt"]["disk"].get<bool>();
    }
  }
  // The two prompts share 70 tokens: some node ends where they diverge and has two children.
  bool branch = false;
  for (const auto& [id, k] : children) {
    if (id != 0 && k >= 2) {
      branch = true;
      EXPECT_LE(by_id.at(id)["end"].get<int>(), 70);
    }
  }
  EXPECT_TRUE(branch) << tree.dump();
  EXPECT_GE(checkpoints, 2);
  EXPECT_TRUE(tree["disk_tier"].get<bool>());
  EXPECT_GE(on_disk, 1) << "released prefixes are written to the disk tier";
  for (const auto& s : tree["sequences"]) EXPECT_TRUE(s["node"] == -1 || by_id.count(s["node"].get<int>()));
  e->reset();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace rw::engine
