// Test helper: the tiny fixture model of the engine tests and seeded random prompts over its vocabulary.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace rw::engine::testing {

inline const std::string kTinyModel = std::string(REWIND_TEST_DATA) + "/golden/models/tiny-qwen35-f32.gguf";

// n token ids below 3900 (the tiny model's ordinary tokens), the same for the same seed.
inline std::vector<int32_t> RandomPrompt(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (auto& t : p) t = static_cast<int32_t>(rng() % 3900);
  return p;
}

}  // namespace rw::engine::testing
