#include <gtest/gtest.h>

#include "base/hash.h"
#include "memory/checkpoint_table.h"
#include "memory/page_pool.h"
#include "memory/slot_pool.h"

namespace rw::memory {
namespace {

TEST(PagePool, AllocatesLowestFreeIdFirstAndPeeksTheSameIds) {
  PagePool pool(4);
  EXPECT_EQ(pool.PeekFree(2), (std::vector<PageId>{0, 1}));
  EXPECT_EQ(pool.Alloc(), 0);
  EXPECT_EQ(pool.Alloc(), 1);
  EXPECT_TRUE(pool.Unref(0));
  EXPECT_EQ(pool.PeekFree(3), (std::vector<PageId>{0, 2, 3}));
  pool.Take(3);
  EXPECT_EQ(pool.free_count(), 2);
  EXPECT_EQ(pool.used_count(), 2);
}

TEST(PagePool, SharedPageIsFreedByItsLastHolderOnly) {
  PagePool pool(2);
  PageId p = pool.Alloc();
  pool.Ref(p);
  EXPECT_EQ(pool.RefCount(p), 2);
  EXPECT_FALSE(pool.Unref(p));
  EXPECT_TRUE(pool.Unref(p));
  EXPECT_EQ(pool.free_count(), 2);
  pool.CheckCounts({0, 0});
}

TEST(PagePoolDeathTest, DoubleFreeAborts) {
  PagePool pool(2);
  PageId p = pool.Alloc();
  EXPECT_TRUE(pool.Unref(p));
  EXPECT_DEATH(pool.Unref(p), "freed twice");
}

TEST(PagePoolDeathTest, TakingAUsedPageAborts) {
  PagePool pool(2);
  pool.Take(1);
  EXPECT_DEATH(pool.Take(1), "taken twice");
}

TEST(PagePoolDeathTest, RefCountMismatchIsCaught) {
  PagePool pool(2);
  pool.Alloc();
  EXPECT_DEATH(pool.CheckCounts({2, 0}), "ref count");
}

TEST(SlotPool, SlotsAreExclusiveAndDoubleReleaseAborts) {
  SlotPool slots(3);
  slots.Take(1);
  EXPECT_EQ(slots.PeekFree(2), (std::vector<SlotId>{0, 2}));
  EXPECT_TRUE(slots.IsUsed(1));
  slots.CheckOwned({1});
  slots.Release(1);
  EXPECT_DEATH(slots.Release(1), "released twice");
  EXPECT_DEATH(slots.CheckOwned({0}), "used");
}

TEST(CheckpointTable, ServesExactlyItsPositionAndPrefix) {
  CheckpointTable t;
  std::vector<int32_t> toks = {5, 6, 7, 8};
  t.Add(0, 3, HashTokens(std::span<const int32_t>(toks).first(3)), 100, 1);
  const Checkpoint& c = t.Get(0);
  EXPECT_TRUE(CheckpointTable::Serves(c, toks));
  std::vector<int32_t> other = {5, 6, 9, 8};
  EXPECT_FALSE(CheckpointTable::Serves(c, other));
  std::vector<int32_t> shorter = {5, 6};
  EXPECT_FALSE(CheckpointTable::Serves(c, shorter));
  EXPECT_EQ(t.total_bytes(), 100);
  t.Ref(0);
  EXPECT_FALSE(t.Unref(0));
  EXPECT_TRUE(t.Unref(0));
  EXPECT_EQ(t.total_bytes(), 0);
  EXPECT_EQ(t.next_id(), 1);  // ids are never reused
  EXPECT_DEATH(t.Unref(0), "freed twice");
}

}  // namespace
}  // namespace rw::memory
