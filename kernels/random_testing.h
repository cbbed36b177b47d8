// Test inputs shared by the kernel tests: reproducible random vectors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace rw::kernels {

// n values drawn from N(0, scale²) by std::mt19937(seed): the same vector for the same arguments.
inline std::vector<float> Random(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

}  // namespace rw::kernels
