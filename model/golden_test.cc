// Golden conformance against llama.cpp v0.5.0 outputs copied into tests/data/golden (docs/conformance.md).
#include <gtest/gtest.h>

#include <cstdio>

#include "model/conformance.h"

namespace rw::model {
namespace {

TEST(Golden, AllModelsMatchLlamaCppWithinTolerance) {
  ConformanceOptions opt;
  opt.dir = std::string(REWIND_TEST_DATA) + "/golden";
  opt.n_threads = 2;
  auto res = RunConformance(opt, [](const CaseResult& r) { std::printf("%s\n", FormatCase(r).c_str()); });
  ASSERT_TRUE(res.ok()) << res.error().ToString();
  // 5 Qwen-family models + 4 Mamba-2 hybrids (README-mamba2.md), plus tiny-qwen35-f32 with q8_0 and q4_0 KV
  // caches (README-kv.md).
  ASSERT_EQ(res->size(), 11u);
  for (const auto& m : *res) {
    std::printf("%s\n", FormatModel(m).c_str());
    EXPECT_FALSE(m.skipped) << m.model << ": " << m.skip_reason;
    EXPECT_TRUE(m.pass) << m.model << ": " << m.why;
    EXPECT_EQ(m.cases.size(), 8u) << m.model;
    if (m.model.find("-kv-") != std::string::npos) {
      EXPECT_NE(m.kv_type, "f32") << m.model << ": the reference's KV cache type was not used";
    }
  }
}

// Low-bit and mixed-type files quantised by llama.cpp's llama-quantize (tests/data/golden_lowbit/README.md):
// Q2_K and IQ2_XXS mixes and a --tensor-type mix holding every low-bit type next to Q4_K, Q8_0, BF16, F16, F32.
TEST(Golden, LowbitAndMixedTypeModelsMatchLlamaCppWithinTolerance) {
  ConformanceOptions opt;
  opt.dir = std::string(REWIND_TEST_DATA) + "/golden_lowbit";
  opt.n_threads = 2;
  auto res = RunConformance(opt, [](const CaseResult& r) { std::printf("%s\n", FormatCase(r).c_str()); });
  ASSERT_TRUE(res.ok()) << res.error().ToString();
  ASSERT_EQ(res->size(), 3u);
  for (const auto& m : *res) {
    std::printf("%s\n", FormatModel(m).c_str());
    EXPECT_FALSE(m.skipped) << m.model << ": " << m.skip_reason;
    EXPECT_TRUE(m.pass) << m.model << ": " << m.why;
    EXPECT_EQ(m.cases.size(), 5u) << m.model;
  }
}

}  // namespace
}  // namespace rw::model
