// kernels/gemm_act.h: the fast activation conversion writes exactly gguf::QuantizeActivationRow's bytes.
#include "kernels/gemm_act.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "base/cpu_features_testing.h"
#include "gguf/quants.h"

namespace rw::kernels {
namespace {

using TT = gguf::TensorType;

// Rows that stress the rounding: random scales, exact halves, repeated maxima of both signs, zeros, -0,
// all-zero blocks, NaN and infinities.
std::vector<float> HardRow(int64_t n, int kind, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::uniform_int_distribution<int> small(-300, 300);
  std::vector<float> x(n);
  const float scale = std::ldexp(1.0f, static_cast<int>(rng() % 40) - 20);
  for (auto& v : x) v = dist(rng) * scale;
  switch (kind) {
    case 1:
      for (auto& v : x) v = 0.5f * static_cast<float>(small(rng));  // ties at every scale
      break;
    case 2:
      for (int64_t i = 0; i < n; i += 7) x[i] = (i % 2 ? -1.0f : 1.0f) * 3.0f * scale;  // repeated max, both signs
      break;
    case 3:
      for (int64_t i = 0; i < n && i < 256; ++i) x[i] = (i % 3 == 0) ? -0.0f : 0.0f;  // zero blocks
      break;
    case 4:
      x[rng() % n] = std::numeric_limits<float>::quiet_NaN();
      x[rng() % n] = -std::numeric_limits<float>::quiet_NaN();
      break;
    case 5:
      x[rng() % n] = std::numeric_limits<float>::infinity();
      x[rng() % n] = -std::numeric_limits<float>::infinity();
      break;
    case 6:
      for (auto& v : x) v = std::ldexp(dist(rng), -140);  // subnormals
      break;
    default: break;
  }
  return x;
}

TEST(GemmAct, FastActivationQuantisationWritesTheScalarBytes) {
  REWIND_SKIP_WITHOUT_AVX2();
  std::mt19937 rng(2024);
  const int64_t n = 1024;
  for (TT t : {TT::kQ8_0, TT::kQ8_K, TT::kF16, TT::kBF16, TT::kF32}) {
    const uint64_t rb = gguf::RowBytes(t, n);
    for (int kind = 0; kind <= 6; ++kind) {
      for (int rep = 0; rep < 20; ++rep) {
        const auto x = HardRow(n, kind, rng);
        std::vector<uint8_t> fast(rb, 0xAB), slow(rb, 0xCD);
        QuantizeActivation(t, x.data(), fast.data(), n);
        gguf::QuantizeActivationRow(t, x.data(), slow.data(), n);
        ASSERT_EQ(fast, slow) << gguf::TypeName(t) << " kind " << kind << " rep " << rep;
      }
    }
  }
}

}  // namespace
}  // namespace rw::kernels
