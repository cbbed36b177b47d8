// Deterministic random numbers for generated weights: splitmix64 + Box-Muller. Every tensor row has its own
// stream seeded from (model seed, tensor name, row), so files are byte-identical across runs, machines and
// thread counts.
#pragma once

#include <cmath>
#include <cstdint>
#include <string_view>

#include "base/hash.h"

namespace rw::modelgen {

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}

  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1) with 53 random bits.
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  double Uniform(double lo, double hi) { return lo + (hi - lo) * Uniform(); }
  // Standard normal (Box-Muller; the second value of each pair is kept for the next call).
  double Normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double u1 = 1.0 - Uniform();  // (0, 1]: log is finite
    const double u2 = Uniform();
    const double r = std::sqrt(-2.0 * std::log(u1));
    const double theta = 6.283185307179586 * u2;
    spare_ = r * std::sin(theta);
    has_spare_ = true;
    return r * std::cos(theta);
  }

 private:
  uint64_t state_;
  double spare_ = 0;
  bool has_spare_ = false;
};

// Seed of one row of one tensor.
inline uint64_t RowSeed(uint64_t model_seed, std::string_view tensor_name, int64_t row) {
  return HashMix(HashMix(model_seed, HashString(tensor_name)), static_cast<uint64_t>(row));
}

}  // namespace rw::modelgen
