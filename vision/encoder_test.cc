#include "vision/encoder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "gguf/writer.h"
#include "kernels/f16.h"
#include "modelgen/mmproj_gen.h"
#include "vision/image_cache.h"
#include "vision/vision_ops.h"
#include "vision/vision_testing.h"

namespace rw::vision {
namespace {

std::unique_ptr<Mmproj> TinyMmproj(int64_t n_out = 24) {
  auto cfg = modelgen::MmprojPreset("tiny", n_out);
  EXPECT_TRUE(cfg);
  std::vector<uint8_t> bytes;
  EXPECT_TRUE(modelgen::WriteMmprojBuffer(*cfg, 7, &bytes).ok());
  auto file = gguf::File::FromBuffer(bytes);
  EXPECT_TRUE(file);
  auto m = Mmproj::FromFile(std::move(*file));
  EXPECT_TRUE(m) << m.error().ToString();
  return std::move(*m);
}

TEST(Mmproj, LoadsTheTinyQwen3vlMergerPreset) {
  auto m = TinyMmproj();
  EXPECT_EQ(m->config().n_embd, 32);
  EXPECT_EQ(m->config().n_out, 24);
  EXPECT_EQ(m->config().pos_side, 4);
  EXPECT_EQ(m->config().align(), 32);
}

TEST(Mmproj, RefusesOtherProjectorsAndDeepstackByName) {
  auto cfg = modelgen::MmprojPreset("tiny", 24);
  std::vector<uint8_t> bytes;
  ASSERT_TRUE(modelgen::WriteMmprojBuffer(*cfg, 7, &bytes).ok());
  auto patch = [&](const std::string& from, const std::string& to) {
    std::vector<uint8_t> b = bytes;
    auto it = std::search(b.begin(), b.end(), from.begin(), from.end());
    EXPECT_NE(it, b.end());
    std::copy(to.begin(), to.end(), it);
    return b;
  };
  // Same length replacement of the projector type string.
  auto other = patch("qwen3vl_merger", "qwen2vl_merger");
  auto f = gguf::File::FromBuffer(other);
  ASSERT_TRUE(f);
  auto m = Mmproj::FromFile(std::move(*f));
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().message.find("qwen2vl_merger"), std::string::npos);
  EXPECT_FALSE(modelgen::MmprojPreset("nope", 24));
}

TEST(VisionEncoder, OutputsOneRowPerMergedTokenInGridOrder) {
  auto m = TinyMmproj();
  VisionEncoder enc(*m, 2);
  PreprocessOptions opt;
  opt.min_tokens = 1;
  PreparedImage p = Prepare(testing::Pattern(64, 96), m->config(), opt);
  ASSERT_EQ(p.width, 64);
  ASSERT_EQ(p.height, 96);
  auto e = enc.Encode(p);
  ASSERT_TRUE(e) << e.error().ToString();
  EXPECT_EQ(e->nx, 2);
  EXPECT_EQ(e->ny, 3);
  EXPECT_EQ(e->rows.size(), 6u * 24);
  for (float v : e->rows) ASSERT_TRUE(std::isfinite(v));
}

TEST(VisionEncoder, GivesTheSameBitsWithAnyThreadCount) {
  auto m = TinyMmproj();
  PreprocessOptions opt;
  PreparedImage p = Prepare(testing::Pattern(100, 70, 3), m->config(), opt);
  auto a = VisionEncoder(*m, 1).Encode(p);
  auto b = VisionEncoder(*m, 3).Encode(p);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->rows, b->rows);
}

TEST(VisionEncoder, DifferentImagesGiveDifferentEmbeddings) {
  auto m = TinyMmproj();
  PreprocessOptions opt;
  opt.min_tokens = 1;
  VisionEncoder enc(*m, 1);
  auto a = enc.Encode(Prepare(testing::Pattern(64, 64, 1), m->config(), opt));
  auto b = enc.Encode(Prepare(testing::Pattern(64, 64, 2), m->config(), opt));
  ASSERT_TRUE(a && b);
  EXPECT_NE(a->rows, b->rows);
}

TEST(VisionEncoder, RefusesASizeThatIsNotAMultipleOf32) {
  auto m = TinyMmproj();
  PreparedImage p;
  p.width = 40;
  p.height = 32;
  p.planar.assign(3 * 40 * 32, 0.0f);
  EXPECT_FALSE(VisionEncoder(*m, 1).Encode(p));
}

TEST(ImageKey, CoversPixelsSizeMmprojAndSettings) {
  const RgbImage a = testing::Pattern(8, 6);
  RgbImage b = a;
  b.rgb[5] ^= 1;
  Digest256 id{};
  PreprocessOptions opt;
  const Digest256 ka = ImageKey(a, id, opt);
  EXPECT_EQ(ka, ImageKey(a, id, opt));
  EXPECT_NE(ka, ImageKey(b, id, opt));
  RgbImage c = a;
  c.width = 6;
  c.height = 8;
  EXPECT_NE(ka, ImageKey(c, id, opt));
  Digest256 id2{};
  id2[0] = 1;
  EXPECT_NE(ka, ImageKey(a, id2, opt));
  opt.max_tokens = 100;
  EXPECT_NE(ka, ImageKey(a, id, opt));
}

// GeluRow converts whole rows (F16C where the CPU has it): the bits of ggml's per-element f16 table lookup.
TEST(VisionOps, GeluRowHasTheF16TableBitsPerElement) {
  std::vector<float> x;
  for (int i = -12000; i <= 12000; ++i) x.push_back(static_cast<float>(i) * 1e-3f);
  for (float v : {-10.0f, 10.0f, -9.99999f, 9.99999f, 65504.0f, -1e30f, 1e-8f, -0.0f}) x.push_back(v);
  std::vector<float> got = x;
  GeluRow(got.data(), static_cast<int64_t>(got.size()));
  constexpr float kA = 0.044715f, kS = 0.79788456080286535587989211986876f;
  for (size_t i = 0; i < x.size(); ++i) {
    float want = x[i];
    if (x[i] <= -10.0f) {
      want = 0.0f;
    } else if (x[i] < 10.0f) {
      const float h = kernels::HalfToFloat(kernels::FloatToHalf(x[i]));
      want = kernels::HalfToFloat(kernels::FloatToHalf(0.5f * h * (1.0f + std::tanh(kS * h * (1.0f + kA * h * h)))));
    }
    ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want)) << "x = " << x[i];
  }
}

}  // namespace
}  // namespace rw::vision
