#include "base/hash.h"

#include <gtest/gtest.h>

#include <string>
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

// Every single-byte change is caught, in the four lanes and in the tail, and so is a change of length.
TEST(ChecksumBytes, CatchesEveryFlippedByteAndEveryLengthChange) {
  std::string s(101, '\0');
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<char>(i * 37 + 11);
  for (size_t n : {size_t{0}, size_t{7}, size_t{32}, size_t{33}, size_t{64}, size_t{101}}) {
    const uint64_t base = ChecksumBytes(s.data(), n);
    if (n < s.size()) EXPECT_NE(base, ChecksumBytes(s.data(), n + 1)) << n;
    for (size_t i = 0; i < n; ++i) {
      for (int bit : {0, 7}) {
        std::string t = s.substr(0, n);
        t[i] = static_cast<char>(t[i] ^ (1 << bit));
        EXPECT_NE(base, ChecksumBytes(t.data(), n)) << "byte " << i << " of " << n;
      }
    }
  }
}

// The value is part of the store's file format (memory/store_format.h): it must not change between builds or
// machines without a format version bump.
TEST(ChecksumBytes, IsTheFormatsFixedFunction) {
  std::string s(77, '\0');
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<char>(i);
  EXPECT_EQ(ChecksumBytes(s.data(), s.size()), 0x77757f6b55c628b2ull);
}

}  // namespace
}  // namespace rw
