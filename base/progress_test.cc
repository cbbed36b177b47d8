#include "base/progress.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace rw {
namespace {

TEST(Progress, StaysSilentUntilTheDelayThenLogsAtMostEveryPeriod) {
  std::vector<std::string> lines;
  Progress p("prefill", 1000, "tokens", 0, /*delay=*/3, /*every=*/2, /*now=*/100);
  p.set_sink([&](const std::string& l) { lines.push_back(l); });
  EXPECT_FALSE(p.Update(100, 101));
  EXPECT_FALSE(p.Update(250, 102.9));
  EXPECT_TRUE(p.Update(300, 103));
  EXPECT_FALSE(p.Update(400, 104.5));
  EXPECT_TRUE(p.Update(500, 105));
  p.Finish(1000, 110);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], "prefill: 300 / 1000 tokens (30%), 100 tokens/s, ETA 7 s");
  EXPECT_EQ(lines[2], "prefill: 1000 tokens done in 10.0 s (100 tokens/s)");
}

TEST(Progress, WorkThatEndsBeforeTheDelayLogsNothing) {
  std::vector<std::string> lines;
  Progress p("loading", 100, "bytes", 0, 3, 3, 0);
  p.set_sink([&](const std::string& l) { lines.push_back(l); });
  EXPECT_FALSE(p.Update(50, 1));
  p.Finish(100, 2);
  EXPECT_TRUE(lines.empty());
  EXPECT_FALSE(p.logged());
}

TEST(Progress, LineShowsDoneTotalPercentRateAndTimeLeft) {
  // 400 tokens were cached: the rate counts the 800 evaluated in 4 s.
  Progress p("prefill of request 7", 4000, "tokens", 400, 3, 3, 10);
  EXPECT_EQ(p.Line(1200, 14), "prefill of request 7: 1200 / 4000 tokens (30%), 200 tokens/s, ETA 14 s");
}

TEST(Progress, BytesArePrintedInMibAndGib) {
  Progress p("loading model.gguf", 4.0 * (1 << 30), "bytes", 0, 0, 0, 0);
  EXPECT_EQ(p.Line(1.0 * (1 << 30), 2),
            "loading model.gguf: 1.00 GiB / 4.00 GiB (25%), 512.0 MiB/s, ETA 6 s");
}

TEST(Progress, NoRateOrEtaBeforeAnyWork) {
  Progress p("make-model", 100, "tensors", 0, 0, 0, 5);
  EXPECT_EQ(p.Line(0, 5), "make-model: 0 / 100 tensors (0%)");
}

TEST(Progress, LongEtaIsMinutesAndSeconds) {
  Progress p("prefill", 100000, "tokens", 0, 0, 0, 0);
  EXPECT_EQ(p.Line(1000, 10), "prefill: 1000 / 100000 tokens (1%), 100 tokens/s, ETA 16m30s");
}

}  // namespace
}  // namespace rw
