#include "memory/eviction.h"

#include <gtest/gtest.h>

#include "memory/memory_test_util.h"

namespace rw::memory {
namespace {

using namespace rw::memory::testing;

TEST(EvictionScore, IsSavedTokensPerByteHalvedEveryHalfLife) {
  EXPECT_EQ(EvictionScore(100, 50, 10, 10, 5), 2.0);
  EXPECT_EQ(EvictionScore(100, 50, 0, 5, 5), 1.0);
  EXPECT_EQ(EvictionScore(100, 50, 0, 10, 5), 0.5);
  EXPECT_EQ(EvictionScore(0, 50, 10, 10, 5), 0.0);
  EXPECT_EQ(EvictionScore(7, 0, 3, 3, 5), 7.0);  // nothing freed counts as one byte
}

TEST(EvictionScore, TiesGoToTheOlderEntryThenTheLowerNode) {
  EvictionCandidate a{EvictionCandidate::Kind::kLeaf, 5, kNone, 0, 10, 1, 3, true};
  EvictionCandidate b{EvictionCandidate::Kind::kLeaf, 4, kNone, 0, 10, 1, 7, true};
  EXPECT_TRUE(EvictsBefore(a, b, 10, 100));
  b.last_use = 3;
  EXPECT_TRUE(EvictsBefore(b, a, 10, 100));
  std::vector<EvictionCandidate> v = {a, b};
  EXPECT_EQ(PickVictim(v, 10, 100), 1u);
}

// Three paths: A (ckpts at 4 and 8), B (ckpt at 8), C (no checkpoint). Pages: 4 tokens of 10 B; states 100 B.
TEST(Eviction, OrderIsWorthlessPagesFirstThenLowestWorkPerByte) {
  MemoryManager m(SmallConfig());
  RunAndInsert(m, {1, 1, 1, 1, 1, 1, 1, 1}, {4, 8});  // A
  RunAndInsert(m, {2, 2, 2, 2, 2, 2, 2, 2}, {8});     // B
  RunAndInsert(m, {3, 3, 3, 3, 3, 3}, {});            // C
  auto plan = m.PlanEvictAll();
  ASSERT_TRUE(plan.ok());
  std::vector<std::string> order;
  for (const TreeRemoval& r : plan->removals) {
    const auto& n = m.tree().node(r.node);
    order.push_back(std::to_string(n.tokens.front()) + "@" + std::to_string(n.end()) + (r.whole_node ? "" : "c"));
  }
  // C is worthless (score 0). A@8: 4 tokens / 120 B (state + 2 exclusive pages of [4,8)... page 1 only: 110 B);
  // A@4 (inner): 4 / 100; B@8: 8 / 120. After A@8 goes, A@4 is a leaf: 4 / 110.
  EXPECT_EQ(order, (std::vector<std::string>{"3@6", "1@8", "1@4", "2@8"}));
  EXPECT_EQ(plan->bytes_freed, 20 + 110 + 110 + 120);
  const std::string before = m.DebugString();
  m.Commit(*plan);
  m.CheckInvariants();
  EXPECT_NE(m.DebugString(), before);
  EXPECT_EQ(m.used_bytes(), 0);
  EXPECT_EQ(m.tree().node_count(), 1);
}

TEST(Eviction, OlderEqualEntriesGoFirst) {
  MemoryManager m(SmallConfig());
  RunAndInsert(m, {1, 1, 1, 1}, {4});
  RunAndInsert(m, {2, 2, 2, 2}, {4});
  auto plan = m.PlanEvict(1);
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->removals.size(), 1u);
  EXPECT_EQ(m.tree().node(plan->removals[0].node).tokens.front(), 1);
  // Using the first path again makes the second one the older.
  SeqId s = Acquire(m, {1, 1, 1, 1, 5});
  Release(m, s, false);
  plan = m.PlanEvict(1);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(m.tree().node(plan->removals[0].node).tokens.front(), 2);
}

TEST(Eviction, FailsCleanlyWhenNotEnoughIsEvictable) {
  MemoryManager m(SmallConfig());
  RunAndInsert(m, {1, 1, 1, 1}, {4});
  const std::string before = m.DebugString();
  auto plan = m.PlanEvict(1000);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.error().kind, ErrorKind::kResourceExhausted);
  EXPECT_EQ(m.DebugString(), before);
}

TEST(Eviction, LeasedPathsAndCheckpointsHeldBySequencesAreNotEvicted) {
  MemoryManager m(SmallConfig());
  RunAndInsert(m, {1, 1, 1, 1, 1, 1, 1, 1}, {4, 8});
  SeqId s = Acquire(m, {1, 1, 1, 1, 1, 1, 1, 1, 9});  // resumes at 8, leases the path
  EXPECT_EQ(m.sequence(s).pos(), 8);
  auto plan = m.PlanEvictAll();
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(plan->removals.empty());
  Release(m, s, false);
  plan = m.PlanEvictAll();
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->removals.size(), 2u);
}

}  // namespace
}  // namespace rw::memory
