#include "base/hex.h"

#include <gtest/gtest.h>

#include <cinttypes>
#include <cstdio>
#include <random>

namespace rw {
namespace {

TEST(Hex, U64HasSixteenLowerCaseDigitsMostSignificantFirst) {
  EXPECT_EQ(HexU64(0), "0000000000000000");
  EXPECT_EQ(HexU64(0xcbf29ce484222325ull), "cbf29ce484222325");
  EXPECT_EQ(HexU64(~0ull), "ffffffffffffffff");
  std::mt19937_64 rng(7);
  for (int i = 0; i < 1000; ++i) {
    const uint64_t v = rng() >> (i % 64);
    char want[17];
    std::snprintf(want, sizeof want, "%016" PRIx64, v);
    ASSERT_EQ(HexU64(v), want);
  }
}

TEST(Hex, BytesGiveTwoDigitsEachInOrder) {
  EXPECT_EQ(HexBytes(""), "");
  EXPECT_EQ(HexBytes(std::string_view("\x00\x0f\xf0\xff", 4)), "000ff0ff");
  EXPECT_EQ(HexBytes("\xe2\x82\xac"), "e282ac");
}

}  // namespace
}  // namespace rw
