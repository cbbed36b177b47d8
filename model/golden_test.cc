// Golden conformance against llama.cpp v0.5.0 outputs copied into tests/data/golden (docs/conformance.md).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/cpu_features.h"
#include "kernels/vec_dot.h"
#include "model/conformance.h"

namespace rw::model {
namespace {

// ctest runs this file twice: with the kernels this CPU picks (golden_tests) and with the scalar reference twins
// only (golden_scalar: REWIND_NO_AVX2=1, model/CMakeLists.txt), so the reference path is checked end to end.
TEST(Golden, ScalarSwitchLeavesOnlyTheReferenceTwins) {
  std::printf("kernels: %s\n", CpuLevelName());
  const char* off = std::getenv("REWIND_NO_AVX2");
  if (off == nullptr || off[0] == '\0' || std::strcmp(off, "0") == 0)
    GTEST_SKIP() << "REWIND_NO_AVX2 is not set: the kernels of this CPU (" << CpuLevelName() << ") run";
  EXPECT_STREQ(CpuLevelName(), "scalar");
  EXPECT_FALSE(CpuHasAvx2Fma());
  EXPECT_FALSE(CpuHasF16c());
  EXPECT_EQ(kernels::ActiveVecDotImpl(), kernels::VecDotImpl::kScalar);
}

// REWIND_GOLDEN_CASE=NAME: that case of every model only (golden_scalar keeps to one, the portable F32 dot
// product being ~20x slower than the SIMD one). Returns the number of cases expected per model.
size_t ApplyCaseFilter(ConformanceOptions* opt, size_t all_cases) {
  const char* only = std::getenv("REWIND_GOLDEN_CASE");
  if (only == nullptr || only[0] == '\0') return all_cases;
  opt->case_filter = only;
  return 1;
}

TEST(Golden, AllModelsMatchLlamaCppWithinTolerance) {
  ConformanceOptions opt;
  opt.dir = std::string(REWIND_TEST_DATA) + "/golden";
  opt.n_threads = 2;
  const size_t n_cases = ApplyCaseFilter(&opt, 8);
  auto res = RunConformance(opt, [](const CaseResult& r) { std::printf("%s\n", FormatCase(r).c_str()); });
  ASSERT_TRUE(res.ok()) << res.error().ToString();
  // 5 Qwen-family models + 8 Mamba-2 hybrids (README-mamba2.md: F32 and Q8_0) + LFM2 and LFM2-MoE, F32 and Q8_0
  // (README-lfm2.md) + kimi-linear F32 and Q8_0 (README-kimi.md), plus tiny-qwen35-f32 with q8_0 and q4_0 KV
  // caches (README-kv.md).
  ASSERT_EQ(res->size(), 21u);
  for (const auto& m : *res) {
    std::printf("%s\n", FormatModel(m).c_str());
    EXPECT_FALSE(m.skipped) << m.model << ": " << m.skip_reason;
    EXPECT_TRUE(m.pass) << m.model << ": " << m.why;
    EXPECT_EQ(m.cases.size(), n_cases) << m.model;
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
  const size_t n_cases = ApplyCaseFilter(&opt, 5);
  auto res = RunConformance(opt, [](const CaseResult& r) { std::printf("%s\n", FormatCase(r).c_str()); });
  ASSERT_TRUE(res.ok()) << res.error().ToString();
  ASSERT_EQ(res->size(), 3u);
  for (const auto& m : *res) {
    std::printf("%s\n", FormatModel(m).c_str());
    EXPECT_FALSE(m.skipped) << m.model << ": " << m.skip_reason;
    EXPECT_TRUE(m.pass) << m.model << ": " << m.why;
    EXPECT_EQ(m.cases.size(), n_cases) << m.model;
  }
}

}  // namespace
}  // namespace rw::model
