#include "vision/image_cache.h"

#include <gtest/gtest.h>

namespace rw::vision {
namespace {

std::shared_ptr<const ImageEmbedding> Emb(size_t floats) {
  auto e = std::make_shared<ImageEmbedding>();
  e->rows.assign(floats, 1.0f);
  return e;
}

Digest256 Key(uint8_t k) {
  Digest256 d{};
  d[0] = k;
  return d;
}

TEST(EmbeddingCache, HitsAfterPutAndEvictsLeastRecentlyUsedBeyondTheBound) {
  EmbeddingCache c(3 * (400 + 64));  // three entries of 100 floats
  c.Put(Key(1), Emb(100));
  c.Put(Key(2), Emb(100));
  c.Put(Key(3), Emb(100));
  EXPECT_NE(c.Get(Key(1)), nullptr);  // 1 is now the most recent
  c.Put(Key(4), Emb(100));            // evicts 2
  EXPECT_EQ(c.Get(Key(2)), nullptr);
  EXPECT_NE(c.Get(Key(1)), nullptr);
  EXPECT_NE(c.Get(Key(3)), nullptr);
  EXPECT_NE(c.Get(Key(4)), nullptr);
  EXPECT_LE(c.bytes(), 3 * (400 + 64));
  EXPECT_EQ(c.entries(), 3);
  EXPECT_EQ(c.misses(), 1u);
}

TEST(EmbeddingCache, DoesNotKeepAnEntryLargerThanTheBound) {
  EmbeddingCache c(100);
  c.Put(Key(1), Emb(1000));
  EXPECT_EQ(c.Get(Key(1)), nullptr);
  EXPECT_EQ(c.bytes(), 0);
}

}  // namespace
}  // namespace rw::vision
