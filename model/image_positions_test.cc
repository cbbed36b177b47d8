#include "model/image_positions.h"

#include <gtest/gtest.h>

namespace rw::model {
namespace {

using P = std::array<int32_t, 4>;

// llama.cpp's layout (mtmd_image_tokens_get_decoder_pos, MTMD_POS_TYPE_MROPE): an image at rotary position s gives
// token i (t = s, row = s + i / nx, col = s + i % nx, 0) and advances the position by max(nx, ny).
TEST(SeqImages, ImageTokensTakeRowAndColumnAndAdvanceByTheLongerSide) {
  static const float rows[1] = {0};
  auto s = SeqImages::Make({{3, 4, 2, rows}, {13, 1, 3, rows}});  // 4 wide x 2 high at 3; 1 x 3 at 13
  ASSERT_TRUE(s);
  EXPECT_EQ(s->RopePos(0), (P{0, 0, 0, 0}));
  EXPECT_EQ(s->RopePos(2), (P{2, 2, 2, 0}));
  EXPECT_EQ(s->RopePos(3), (P{3, 3, 3, 0}));   // i 0: row 0, col 0
  EXPECT_EQ(s->RopePos(6), (P{3, 3, 6, 0}));   // i 3: row 0, col 3
  EXPECT_EQ(s->RopePos(7), (P{3, 4, 3, 0}));   // i 4: row 1, col 0
  EXPECT_EQ(s->RopePos(10), (P{3, 4, 6, 0}));  // last token of the first image
  EXPECT_EQ(s->RopePos(11), (P{7, 7, 7, 0}));  // 3 + max(4, 2): 8 tokens took 4 positions
  EXPECT_EQ(s->RopePos(13), (P{9, 9, 9, 0}));  // second image at 9
  EXPECT_EQ(s->RopePos(15), (P{9, 11, 9, 0}));
  EXPECT_EQ(s->RopePos(16), (P{12, 12, 12, 0}));  // 9 + max(1, 3)
  EXPECT_EQ(s->Find(10)->start, 3);
  EXPECT_EQ(s->Find(11), nullptr);
  EXPECT_EQ(s->Find(2), nullptr);
}

TEST(SeqImages, RefusesOverlappingOrEmptySpans) {
  static const float rows[1] = {0};
  EXPECT_FALSE(SeqImages::Make({{0, 2, 2, rows}, {3, 1, 1, rows}}));
  EXPECT_FALSE(SeqImages::Make({{0, 0, 2, rows}}));
  EXPECT_FALSE(SeqImages::Make({{0, 2, 2, nullptr}}));
}

}  // namespace
}  // namespace rw::model
