// The budget bounds the cache, not the working set (MemoryConfig::live_over_budget, docs/cache-budget.md):
// live sequences go past a tiny budget only after everything evictable is gone, the pool still bounds them,
// and what they leave behind is trimmed back to the budget, best entries kept.
#include <gtest/gtest.h>

#include "memory/memory_manager.h"
#include "memory/memory_test_util.h"

namespace rw::memory {
namespace {

using namespace rw::memory::testing;

// Pages of 4 tokens / 10 B, checkpoints of 100 B; a 150 B budget holds one checkpoint and 5 pages.
MemoryConfig TinyConfig(bool live_over_budget, int32_t max_pages = 40) {
  MemoryConfig c = SmallConfig(/*budget=*/150, /*slots=*/4);
  c.max_pages = max_pages;
  c.live_over_budget = live_over_budget;
  return c;
}

std::vector<int32_t> Tokens(int32_t n, int32_t value) { return std::vector<int32_t>(static_cast<size_t>(n), value); }

void CommitEvict(MemoryManager& m, const EvictPlan& p) {
  m.Commit(p);
  m.CheckInvariants();
}

TEST(Budget, PoolFollowsMaxPagesOnlyWhenLiveSequencesMayExceedTheBudget) {
  EXPECT_EQ(TinyConfig(true).MaxPages(), 40);
  EXPECT_EQ(TinyConfig(false).MaxPages(), 15);  // 150 B / 10 B: the hard budget caps the pool
  EXPECT_EQ(TinyConfig(true, 0).MaxPages(), 15);
}

TEST(Budget, LiveSequenceExceedsATinyBudgetOnlyOnceNothingIsEvictable) {
  MemoryManager m(TinyConfig(true));
  RunAndInsert(m, Tokens(8, 1), {8});  // tree: 2 pages + a checkpoint at 8 = 120 B
  ASSERT_EQ(m.used_bytes(), 120);
  SeqId s = Acquire(m, Tokens(81, 2));
  const auto toks = Tokens(64, 2);  // 16 pages = 160 B: more than the whole budget
  const std::string before = m.DebugString();
  auto strict = m.PlanAppend(s, toks);
  ASSERT_FALSE(strict.ok());
  EXPECT_EQ(strict.error().kind, ErrorKind::kResourceExhausted);
  EXPECT_FALSE(m.PlanMakeRoom(m.AppendBytes(s, 64), 16).ok());
  EXPECT_EQ(m.DebugString(), before);

  auto room = m.PlanMakeRoomLive(m.AppendBytes(s, 64), 16);
  ASSERT_TRUE(room.ok()) << room.error().message;
  EXPECT_EQ(room->bytes_freed, 120);  // everything evictable
  CommitEvict(m, *room);
  EXPECT_FALSE(m.HasEvictable());
  Append(m, s, toks);  // nothing evictable: over the budget, still served
  EXPECT_EQ(m.used_bytes(), 160);
  Append(m, s, Tokens(4, 2));
  EXPECT_EQ(m.used_bytes(), 170);
  EXPECT_TRUE(m.WithinBudget());
  // Checkpoints are cache, not working set: they never go over the budget.
  auto ck = m.PlanCheckpoint(s);
  ASSERT_FALSE(ck.ok());
  EXPECT_EQ(ck.error().kind, ErrorKind::kResourceExhausted);
}

TEST(Budget, HardBudgetFailsAppendsItCannotHold) {
  MemoryManager m(TinyConfig(false));
  SeqId s = Acquire(m, Tokens(61, 3));
  Append(m, s, Tokens(60, 3));  // 15 pages: the whole pool and budget
  EXPECT_FALSE(m.PlanAppend(s, Tokens(1, 3)).ok());
  auto room = m.PlanMakeRoomLive(10, 1);
  ASSERT_FALSE(room.ok());
  EXPECT_EQ(room.error().kind, ErrorKind::kResourceExhausted);
}

TEST(Budget, PagePoolStillBoundsTheWorkingSet) {
  MemoryManager m(TinyConfig(true, /*max_pages=*/12));
  SeqId s = Acquire(m, Tokens(49, 4));
  Append(m, s, Tokens(48, 4));  // 12 pages = 120 B: the whole pool
  EXPECT_FALSE(m.PlanMakeRoomLive(10, 1).ok());
  auto p = m.PlanAppend(s, Tokens(1, 4));
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().kind, ErrorKind::kResourceExhausted);
}

TEST(Budget, TrimAfterReleaseKeepsTheBestEntriesWithinTheBudget) {
  MemoryManager m(TinyConfig(true));
  SeqId s = Acquire(m, Tokens(41, 5));
  Append(m, s, Tokens(8, 5));
  TakeCheckpoint(m, s);          // at 8: 2 pages + 100 B
  Append(m, s, Tokens(32, 5));   // 10 pages + 100 B = 200 B: over the budget, nothing evictable
  EXPECT_EQ(m.used_bytes(), 200);
  EXPECT_FALSE(m.PlanCheckpoint(s).ok());
  Release(m, s, true);
  EXPECT_EQ(m.used_bytes(), 200);  // the tree holds it all until the trim
  EXPECT_FALSE(m.WithinBudget());
  EvictPlan trim = m.PlanTrim();
  // Pages past the deepest checkpoint are worth nothing to a hybrid model: they go, the checkpoint stays.
  ASSERT_EQ(trim.removals.size(), 1u);
  EXPECT_EQ(trim.bytes_freed, 80);
  EXPECT_TRUE(trim.ops.empty());
  CommitEvict(m, trim);
  EXPECT_EQ(m.used_bytes(), 120);
  EXPECT_TRUE(m.PlanTrim().removals.empty());
  CacheHit hit;
  SeqId again = Acquire(m, Tokens(41, 5), &hit);
  EXPECT_EQ(hit.resume_pos, 8);
  EXPECT_EQ(hit.source, StateSource::kCheckpoint);
  Release(m, again, false);
}

TEST(Budget, TrimEvictsEverythingWhenOtherLiveSequencesFillTheBudget) {
  MemoryManager m(TinyConfig(true));
  SeqId a = Acquire(m, Tokens(9, 6));
  Append(m, a, Tokens(8, 6));
  TakeCheckpoint(m, a);  // 120 B
  SeqId b = Acquire(m, Tokens(61, 7));
  auto room = m.PlanMakeRoomLive(m.AppendBytes(b, 60), 15);
  ASSERT_TRUE(room.ok());
  EXPECT_TRUE(room->removals.empty());  // nothing evictable: a is live
  CommitEvict(m, *room);
  Append(m, b, Tokens(60, 7));  // 270 B in all
  Release(m, a, true);
  EvictPlan trim = m.PlanTrim();
  EXPECT_EQ(trim.bytes_freed, 120);  // b alone exceeds the budget: the cache keeps nothing
  CommitEvict(m, trim);
  EXPECT_FALSE(m.HasEvictable());
  EXPECT_TRUE(m.WithinBudget());
  Release(m, b, true);
  CommitEvict(m, m.PlanTrim());
  EXPECT_LE(m.used_bytes(), 150);
  EXPECT_TRUE(m.WithinBudget());
}

}  // namespace
}  // namespace rw::memory
