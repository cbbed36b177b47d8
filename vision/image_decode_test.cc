#include "vision/image_decode.h"

#include <gtest/gtest.h>

#include "vision/vision_testing.h"

namespace rw::vision {
namespace {

TEST(DecodeImage, PngRoundTripsExactly) {
  const RgbImage img = testing::Pattern(37, 21);
  auto d = DecodeImage(testing::EncodePng(img), ImageLimits{});
  ASSERT_TRUE(d) << d.error().ToString();
  EXPECT_EQ(d->width, 37);
  EXPECT_EQ(d->height, 21);
  EXPECT_EQ(d->rgb, img.rgb);
}

TEST(DecodeImage, JpegDecodesToItsSize) {
  auto d = DecodeImage(testing::EncodeJpeg(testing::Pattern(64, 48)), ImageLimits{});
  ASSERT_TRUE(d) << d.error().ToString();
  EXPECT_EQ(d->width, 64);
  EXPECT_EQ(d->height, 48);
}

TEST(DecodeImage, RefusesTruncatedPngAndJpeg) {
  for (auto bytes : {testing::EncodePng(testing::Pattern(40, 40)), testing::EncodeJpeg(testing::Pattern(40, 40))}) {
    bytes.resize(bytes.size() / 2);
    auto d = DecodeImage(bytes, ImageLimits{});
    ASSERT_FALSE(d);
    EXPECT_EQ(d.error().kind, ErrorKind::kInvalidArgument) << d.error().message;
  }
}

TEST(DecodeImage, RefusesOtherFormatsByName) {
  std::vector<uint8_t> gif = {'G', 'I', 'F', '8', '9', 'a', 1, 0, 1, 0};
  auto d = DecodeImage(gif, ImageLimits{});
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().message.find("GIF"), std::string::npos);
  std::vector<uint8_t> webp = {'R', 'I', 'F', 'F', 0, 0, 0, 0, 'W', 'E', 'B', 'P', 0};
  d = DecodeImage(webp, ImageLimits{});
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().message.find("WebP"), std::string::npos);
  d = DecodeImage(std::vector<uint8_t>{1, 2, 3}, ImageLimits{});
  ASSERT_FALSE(d);
  EXPECT_FALSE(DecodeImage(std::vector<uint8_t>{}, ImageLimits{}));
}

TEST(DecodeImage, EnforcesByteAndPixelLimitsBeforeDecoding) {
  const auto png = testing::EncodePng(testing::Pattern(50, 40));
  ImageLimits lim;
  lim.max_pixels = 50 * 40 - 1;
  auto d = DecodeImage(png, lim);
  ASSERT_FALSE(d);
  EXPECT_EQ(d.error().kind, ErrorKind::kOutOfRange);
  EXPECT_NE(d.error().message.find("--image-max-pixels"), std::string::npos);
  lim = ImageLimits{};
  lim.max_bytes = static_cast<int64_t>(png.size()) - 1;
  d = DecodeImage(png, lim);
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().message.find("--image-max-bytes"), std::string::npos);
}

TEST(DecodeImage, GarbageAfterAValidHeaderIsAnErrorNotACrash) {
  auto png = testing::EncodePng(testing::Pattern(16, 16));
  for (size_t i = 40; i < png.size(); i += 7) png[i] ^= 0x5A;
  auto d = DecodeImage(png, ImageLimits{});
  if (d) EXPECT_EQ(d->width, 16);  // stb may still decode a damaged deflate stream; it must not crash
}

TEST(DecodeBase64, DecodesStandardAndUrlSafeAlphabets) {
  auto a = DecodeBase64("aGVsbG8=", 100);
  ASSERT_TRUE(a);
  EXPECT_EQ(std::string(a->begin(), a->end()), "hello");
  auto b = DecodeBase64("-_8", 100);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->size(), 2u);
  EXPECT_FALSE(DecodeBase64("ab$c", 100));
  EXPECT_FALSE(DecodeBase64("aGVsbG8=", 3));
}

}  // namespace
}  // namespace rw::vision
