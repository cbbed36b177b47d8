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
  ASSERT_EQ(res->size(), 9u);  // 5 Qwen-family models + 4 Mamba-2 hybrids (README-mamba2.md)
  for (const auto& m : *res) {
    std::printf("%s\n", FormatModel(m).c_str());
    EXPECT_FALSE(m.skipped) << m.model << ": " << m.skip_reason;
    EXPECT_TRUE(m.pass) << m.model << ": " << m.why;
    EXPECT_EQ(m.cases.size(), 8u) << m.model;
  }
}

}  // namespace
}  // namespace rw::model
