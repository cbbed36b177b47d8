#include "base/hash.h"

#include <gtest/gtest.h>

#include <vector>

namespace rw {
namespace {

TEST(HashTokens, ExtendsIncrementally) {
  std::vector<int32_t> a = {1, 2, 3, 4, 5};
  uint64_t whole = HashTokens(a);
  uint64_t part = HashTokens(std::span(a).subspan(0, 2));
  EXPECT_EQ(whole, HashTokens(std::span(a).subspan(2), part));
  EXPECT_NE(whole, HashTokens(std::span(a).subspan(0, 4)));
}

TEST(HashBytes, IsStable) { EXPECT_EQ(HashString("rewind"), HashString("rewind")); }

}  // namespace
}  // namespace rw
