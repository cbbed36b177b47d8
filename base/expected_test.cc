#include "base/expected.h"

#include <gtest/gtest.h>

namespace rw {
namespace {

Expected<int> Half(int x) {
  if (x % 2) return Error::InvalidArgument("odd");
  return x / 2;
}

Expected<int> Quarter(int x) {
  REWIND_ASSIGN_OR_RETURN(int h, Half(x));
  return Half(h);
}

TEST(Expected, CarriesValueOrError) {
  EXPECT_EQ(*Quarter(8), 2);
  auto e = Quarter(6);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().kind, ErrorKind::kInvalidArgument);
  EXPECT_EQ(e.error().ToString(), "invalid_argument: odd");
}

}  // namespace
}  // namespace rw
