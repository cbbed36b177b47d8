#include "base/big_buffer.h"

#include <cstdint>
#include <cstring>
#include <numeric>
#include <string>

#include <gtest/gtest.h>

namespace rw {
namespace {

TEST(BigVector, LargeBlocksStartOnAHugePageBoundaryAndKeepWhatIsWritten) {
  BigVector<float> v(3'000'000);  // 12 MB: mapped by BigAllocator
  EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data()) % (uintptr_t{2} << 20), 0u);
  std::iota(v.begin(), v.end(), 0.0f);
  BigVector<float> w = v;  // copies through the same allocator
  ASSERT_EQ(w.size(), v.size());
  EXPECT_EQ(w[2'999'999], 2'999'999.0f);
  EXPECT_EQ(w[12345], 12345.0f);
  w.resize(5'000'000);  // grows into a new mapping, the old one is unmapped
  EXPECT_EQ(w[2'999'999], 2'999'999.0f);
}

TEST(BigVector, AFreedLargeBlockIsClearedBeforeItIsReused) {
  const size_t n = (size_t{3} << 20) + 123;  // an odd size: the block is mapped in whole 2 MiB pages
  const void* first = nullptr;
  {
    BigVector<uint8_t> secret(n);
    std::memset(secret.data(), 0xAB, n);
    first = secret.data();
  }
  BigVector<uint8_t> next(n);  // the same mapped size: the freed block comes back
  EXPECT_EQ(static_cast<const void*>(next.data()), first);
  size_t nonzero = 0;
  for (size_t i = 0; i < n; ++i) nonzero += next[i] != 0;
  EXPECT_EQ(nonzero, 0u);
}

TEST(BigVector, SmallBlocksAndByteBuffersBehaveAsVectors) {
  BigBytes b;
  const std::string s = "state bytes";
  b.assign(s.begin(), s.end());
  EXPECT_EQ(AsView(b), s);
  BigVector<int> small(10, 7);  // explicit value: still initialised
  EXPECT_EQ(std::accumulate(small.begin(), small.end(), 0), 70);
}

struct alignas(64) Wide {
  float lanes[16];
};

TEST(BigVector, SmallBlocksOfOverAlignedTypesKeepTheirAlignment) {
  for (size_t n : {1, 3, 100}) {
    BigVector<Wide> v(n);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data()) % 64, 0u) << n;
  }
}

}  // namespace
}  // namespace rw
