#include "vision/preprocess.h"

#include <gtest/gtest.h>

#include "vision/vision_testing.h"

namespace rw::vision {
namespace {

// Expected sizes worked out by hand from llama.cpp's calc_size_preserved_ratio (align 32, 8..4096 tokens).
TEST(SmartResizeTarget, MatchesLlamaCppRounding) {
  const int64_t a = 32 * 32;
  EXPECT_EQ(SmartResizeTarget({1024, 768}, 32, 8 * a, 4096 * a), (ImageSize{1024, 768}));
  EXPECT_EQ(SmartResizeTarget({100, 50}, 32, 0, 4096 * a), (ImageSize{96, 64}));  // round: 3.125->3, 1.56->2
  // 96x64 = 6 tokens < 8: beta = sqrt(8192 / 5000) = 1.28 -> ceil(128 / 32), ceil(64 / 32).
  EXPECT_EQ(SmartResizeTarget({100, 50}, 32, 8 * a, 4096 * a), (ImageSize{128, 64}));
  // Too small: 32x32 = 1 token < 8: scale up by sqrt(8192/1024) = 2.83 -> ceil(90.5/32)*32 = 96.
  EXPECT_EQ(SmartResizeTarget({32, 32}, 32, 8 * a, 4096 * a), (ImageSize{96, 96}));
  // Too large: 4000x3000 > 4096 tokens: beta = sqrt(12e6 / 4194304) = 1.6915; floor(1773.6/32)*32 = 1760,
  // floor(2364.8/32)*32 = 2336.
  EXPECT_EQ(SmartResizeTarget({4000, 3000}, 32, 8 * a, 4096 * a), (ImageSize{2336, 1760}));
  EXPECT_EQ(SmartResizeTarget({1, 1}, 32, 0, 0), (ImageSize{32, 32}));
}

TEST(ResampleBicubic, KeepsAConstantImageConstant) {
  RgbImage img;
  img.width = 13;
  img.height = 7;
  img.rgb.assign(13 * 7 * 3, 77);
  for (auto [w, h] : {std::pair{32, 32}, std::pair{5, 3}, std::pair{13, 20}}) {
    RgbImage r = ResampleBicubic(img, w, h);
    ASSERT_EQ(r.rgb.size(), static_cast<size_t>(w) * h * 3);
    for (uint8_t v : r.rgb) ASSERT_EQ(v, 77);
  }
}

// Pillow's filter by hand on a 4x1 ramp [0, 85, 170, 255] -> 2x1 (scale 2: support 4, a = -0.5): output 0 has
// centre 1.0 and taps at distances (x - 0.5) / 2 = -0.25, 0.25, 0.75, 1.25 with weights 0.8671875, 0.8671875,
// 0.2265625, -0.0703125 (sum 1.890625): 49.88; output 1 mirrors them: 205.12. Fixed point rounds to 50 and 205.
TEST(ResampleBicubic, DownscalesARampWithPillowsKernel) {
  RgbImage img;
  img.width = 4;
  img.height = 1;
  for (uint8_t v : {0, 85, 170, 255}) img.rgb.insert(img.rgb.end(), {v, v, v});
  RgbImage r = ResampleBicubic(img, 2, 1);
  ASSERT_EQ(r.rgb.size(), 6u);
  EXPECT_EQ(r.rgb[0], 50);
  EXPECT_EQ(r.rgb[3], 205);
}

TEST(ResizePadded, KeepsAspectRatioAndPadsBlackCentred) {
  RgbImage img;
  img.width = 64;
  img.height = 32;
  img.rgb.assign(64 * 32 * 3, 200);
  RgbImage r = ResizePadded(img, {64, 64});
  ASSERT_EQ(r.width, 64);
  ASSERT_EQ(r.height, 64);
  // scale = min(1, 2) = 1: 64x32 pasted at y offset 16.
  EXPECT_EQ(r.rgb[(0 * 64 + 10) * 3], 0);
  EXPECT_EQ(r.rgb[(15 * 64 + 10) * 3], 0);
  EXPECT_EQ(r.rgb[(16 * 64 + 10) * 3], 200);
  EXPECT_EQ(r.rgb[(47 * 64 + 10) * 3], 200);
  EXPECT_EQ(r.rgb[(48 * 64 + 10) * 3], 0);
}

TEST(NormalisePlanar, UsesMeanAndStdPerChannel) {
  RgbImage img;
  img.width = 1;
  img.height = 2;
  img.rgb = {255, 0, 51, 0, 255, 102};
  auto p = NormalisePlanar(img, {0.5f, 0.5f, 0.5f}, {0.5f, 0.25f, 1.0f});
  ASSERT_EQ(p.size(), 6u);
  EXPECT_FLOAT_EQ(p[0], 1.0f);   // R, pixel 0
  EXPECT_FLOAT_EQ(p[1], -1.0f);  // R, pixel 1
  EXPECT_FLOAT_EQ(p[2], -2.0f);  // G, pixel 0
  EXPECT_FLOAT_EQ(p[4], 0.2f - 0.5f);
}

}  // namespace
}  // namespace rw::vision
