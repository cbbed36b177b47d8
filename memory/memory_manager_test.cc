#include "memory/memory_manager.h"

#include <gtest/gtest.h>

#include "memory/memory_test_util.h"

namespace rw::memory {
namespace {

using namespace rw::memory::testing;

template <typename T>
const T& OnlyOp(const std::vector<DataOp>& ops) {
  EXPECT_EQ(ops.size(), 1u) << ToString(ops);
  return std::get<T>(ops.at(0));
}

TEST(MemoryManager, NewSequenceStartsFromTheZeroState) {
  MemoryManager m(SmallConfig());
  auto p = m.PlanAcquire(std::vector<int32_t>{1, 2, 3});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->hit.resume_pos, 0);
  EXPECT_EQ(p->hit.reason, "no shared prefix");
  EXPECT_EQ(OnlyOp<ZeroStateOp>(p->ops).slot, p->live);
  SeqId s = m.Commit(*p);
  m.CheckInvariants();
  EXPECT_EQ(m.sequence(s).pos(), 0);
  EXPECT_EQ(m.slots().free_count(), 6);
}

TEST(MemoryManager, AppendAllocatesPagesAndKeepsTheBatchStartStateForReplay) {
  MemoryManager m(SmallConfig());
  SeqId s = Acquire(m, {1, 2, 3, 4, 5, 6});
  const SlotId live = m.sequence(s).live, spare = m.sequence(s).spare;
  auto p = m.PlanAppend(s, std::vector<int32_t>{1, 2, 3, 4, 5});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->take, (std::vector<PageId>{0, 1}));
  EXPECT_EQ(p->state_in, live);
  EXPECT_EQ(p->state_out, spare);
  EXPECT_TRUE(p->ops.empty());
  EXPECT_EQ(p->bytes, 20);
  m.Commit(*p);
  m.CheckInvariants();
  const Sequence& q = m.sequence(s);
  EXPECT_EQ(q.live, spare);
  EXPECT_EQ(q.spare, live);
  EXPECT_TRUE(q.replay.valid);
  EXPECT_EQ(q.replay.start, 0);
  EXPECT_EQ(q.replay.len, 5);
  EXPECT_EQ(m.used_bytes(), 20);
}

TEST(MemoryManager, SharedPartlyFilledLastPageIsCopiedOnWrite) {
  MemoryManager m(SmallConfig());
  RunAndInsert(m, {1, 2, 3, 4, 5, 6}, {6});
  CacheHit hit;
  SeqId s = Acquire(m, {1, 2, 3, 4, 5, 6, 7}, &hit);
  EXPECT_EQ(hit.resume_pos, 6);
  EXPECT_EQ(hit.source, StateSource::kCheckpoint);
  const PageId shared = m.sequence(s).pages[1];
  EXPECT_EQ(m.pages().RefCount(shared), 2);
  auto p = m.PlanAppend(s, std::vector<int32_t>{7});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->cow_index, 1);
  const auto& copy = OnlyOp<CopyPageOp>(p->ops);
  EXPECT_EQ(copy.from, shared);
  EXPECT_EQ(copy.to, p->take[0]);
  m.Commit(*p);
  m.CheckInvariants();
  EXPECT_EQ(m.pages().RefCount(shared), 1);
  EXPECT_EQ(m.sequence(s).pages[1], copy.to);
}

TEST(MemoryManager, TruncateInsideTheLastBatchIsExactThroughTheReplayLog) {
  MemoryManager m(SmallConfig());
  SeqId s = Acquire(m, {9});
  Append(m, s, {1, 2, 3});
  Append(m, s, {4, 5, 6, 7, 8});
  auto p = m.PlanTruncate(s, 5);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->state.source, StateSource::kReplay);
  EXPECT_EQ(p->state.pos, 5);
  EXPECT_TRUE(p->refeed.empty());
  // In place in the spare slot (no state copy), which then becomes the live slot.
  const SlotId live = m.sequence(s).live, spare = m.sequence(s).spare;
  const auto& replay = OnlyOp<ReplayStateOp>(p->ops);
  EXPECT_EQ(replay.from, spare);
  EXPECT_EQ(replay.to, spare);
  EXPECT_EQ(replay.count, 2);
  m.Commit(*p);
  m.CheckInvariants();
  EXPECT_EQ(m.sequence(s).pos(), 5);
  EXPECT_EQ(m.sequence(s).pages.size(), 2u);
  EXPECT_EQ(m.sequence(s).live, spare);
  EXPECT_EQ(m.sequence(s).spare, live);
  // The window is spent: going further back needs a checkpoint (none here: from zero, re-feeding 3 tokens).
  EXPECT_FALSE(m.sequence(s).replay.valid);
  p = m.PlanTruncate(s, 3);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->state.source, StateSource::kZero);
  EXPECT_EQ(p->refeed.size(), 3u);
}

TEST(MemoryManager, TruncateBeyondTheWindowResumesAtTheNewestCheckpointAndRefeeds) {
  MemoryManager m(SmallConfig());
  SeqId s = Acquire(m, {9});
  Append(m, s, {1, 2, 3, 4});
  CheckpointId c4 = TakeCheckpoint(m, s);
  Append(m, s, {5, 6, 7, 8});
  CheckpointId c8 = TakeCheckpoint(m, s);
  Append(m, s, {9, 10, 11, 12});
  auto p = m.PlanTruncate(s, 6);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->state.source, StateSource::kCheckpoint);
  EXPECT_EQ(p->state.pos, 4);
  EXPECT_EQ(p->refeed, (std::vector<int32_t>{5, 6}));
  EXPECT_EQ(p->drop_ckpts, (std::vector<CheckpointId>{c8}));
  ASSERT_EQ(p->ops.size(), 2u);
  EXPECT_EQ(std::get<RestoreCheckpointOp>(p->ops[0]).ckpt, c4);
  EXPECT_EQ(std::get<FreeCheckpointOp>(p->ops[1]).ckpt, c8);
  m.Commit(*p);
  m.CheckInvariants();
  const Sequence& q = m.sequence(s);
  EXPECT_EQ(q.pos(), 4);  // no attention entries past the resume point
  EXPECT_EQ(q.pages.size(), 1u);
  EXPECT_FALSE(q.replay.valid);
  EXPECT_EQ(m.used_bytes(), 10 + 100);
}

TEST(MemoryManager, TruncateWithoutAnyStateGoesBackToZero) {
  MemoryManager m(SmallConfig());
  SeqId s = Acquire(m, {9});
  Append(m, s, {1, 2, 3, 4});
  Append(m, s, {5, 6});
  auto p = m.PlanTruncate(s, 3);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->state.source, StateSource::kZero);
  EXPECT_EQ(p->refeed, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(OnlyOp<ZeroStateOp>(p->ops).slot, m.sequence(s).live);
  // To the current position: nothing to do.
  p = m.PlanTruncate(s, 6);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->state.source, StateSource::kLive);
  EXPECT_TRUE(p->ops.empty());
  EXPECT_FALSE(m.PlanTruncate(s, 7).ok());
  EXPECT_FALSE(m.PlanTruncate(s, -1).ok());
}

TEST(MemoryManager, FailedPlansChangeNothing) {
  MemoryManager m(SmallConfig(/*budget=*/115, /*slots=*/2));
  SeqId s = Acquire(m, {1, 2, 3});
  Append(m, s, {1, 2, 3});
  const std::string before = m.DebugString();
  auto a = m.PlanAppend(s, std::vector<int32_t>(200, 1));
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.error().kind, ErrorKind::kResourceExhausted);
  ASSERT_TRUE(m.PlanCheckpoint(s).ok());  // 10 + 100 <= 115
  Append(m, s, {4, 5});                    // 20 B used
  const std::string full = m.DebugString();
  auto c = m.PlanCheckpoint(s);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().kind, ErrorKind::kResourceExhausted);
  auto acq = m.PlanAcquire(std::vector<int32_t>{7});  // both slots taken
  ASSERT_FALSE(acq.ok());
  EXPECT_EQ(acq.error().kind, ErrorKind::kResourceExhausted);
  EXPECT_FALSE(m.PlanAcquire(std::vector<int32_t>{}).ok());
  EXPECT_FALSE(m.PlanAppend(s, std::vector<int32_t>{}).ok());
  EXPECT_FALSE(m.PlanTruncate(99, 0).ok());
  EXPECT_EQ(m.DebugString(), full);
  EXPECT_NE(before, full);
  m.CheckInvariants();
}

TEST(MemoryManagerDeathTest, CommittingAStalePlanAborts) {
  MemoryManager m(SmallConfig());
  SeqId s = Acquire(m, {1});
  auto p1 = m.PlanAppend(s, std::vector<int32_t>{1});
  auto p2 = m.PlanAppend(s, std::vector<int32_t>{2});
  m.Commit(*p1);
  EXPECT_DEATH(m.Commit(*p2), "stale plan");
}

TEST(MemoryManager, ForkSharesPagesAndCopiesTheLiveState) {
  MemoryManager m(SmallConfig());
  SeqId a = Acquire(m, {1});
  Append(m, a, {1, 2, 3, 4, 5, 6});
  auto f = m.PlanFork(a);
  ASSERT_TRUE(f.ok());
  const auto& copy = OnlyOp<CopyStateOp>(f->ops);
  EXPECT_EQ(copy.from, m.sequence(a).live);
  SeqId b = m.Commit(*f);
  m.CheckInvariants();
  EXPECT_EQ(m.sequence(b).pages, m.sequence(a).pages);
  EXPECT_EQ(m.pages().RefCount(m.sequence(a).pages[1]), 2);
  EXPECT_FALSE(m.sequence(b).replay.valid);
  auto p = m.PlanAppend(b, std::vector<int32_t>{9});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->cow_index, 1);
  m.Commit(*p);
  m.CheckInvariants();
  EXPECT_NE(m.sequence(b).pages[1], m.sequence(a).pages[1]);
  EXPECT_EQ(m.sequence(b).pages[0], m.sequence(a).pages[0]);
}

TEST(MemoryManager, AcquireAdoptsTheLiveStateOfAnIdleSequence) {
  MemoryManager m(SmallConfig());
  SeqId s = Acquire(m, {1});
  Append(m, s, {1, 2, 3, 4, 5});
  m.SetIdle(s, true);
  auto p = m.PlanAcquire(std::vector<int32_t>{1, 2, 3, 4, 5, 6});
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->adopt);
  EXPECT_EQ(p->seq, s);
  EXPECT_EQ(p->hit.source, StateSource::kLive);
  EXPECT_EQ(p->hit.reason, "live state at 5, LCP at 5");
  EXPECT_TRUE(p->ops.empty());
  // A prompt diverging inside the last batch resumes through the replay log.
  p = m.PlanAcquire(std::vector<int32_t>{1, 2, 3, 9});
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->adopt);
  EXPECT_EQ(p->hit.resume_pos, 3);
  EXPECT_EQ(p->hit.reason, "replay log state at 3, LCP at 3");
  EXPECT_EQ(OnlyOp<ReplayStateOp>(p->ops).count, 3);
  EXPECT_EQ(m.Commit(*p), s);
  m.CheckInvariants();
  EXPECT_EQ(m.sequence(s).pos(), 3);
  EXPECT_FALSE(m.sequence(s).idle);
}

TEST(MemoryManager, CacheCanBeBypassedPerRequest) {
  MemoryManager m(SmallConfig());
  RunAndInsert(m, {1, 2, 3, 4, 5, 6}, {4});
  auto p = m.PlanAcquire(std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7}, /*use_cache=*/false);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->hit.resume_pos, 0);
  EXPECT_EQ(p->hit.reason, "cache disabled for this request");
}

TEST(MemoryManager, ReleaseIntoTheTreeMakesTheNextTurnResumeAtTheFinalCheckpoint) {
  MemoryManager m(SmallConfig());
  SeqId s = Acquire(m, {1, 2, 3});
  Append(m, s, {1, 2, 3});
  Append(m, s, {10, 11});  // generated
  TakeCheckpoint(m, s);
  Release(m, s, true);
  EXPECT_EQ(m.slots().free_count(), 8);
  CacheHit hit;
  SeqId t = Acquire(m, {1, 2, 3, 10, 11, 4, 5}, &hit);
  EXPECT_EQ(hit.resume_pos, 5);
  EXPECT_EQ(hit.lcp, 5);
  EXPECT_EQ(m.sequence(t).pos(), 5);
  EXPECT_EQ(hit.reason, "nearest checkpoint at 5, LCP at 5");
  Release(m, t, false);
  auto all = m.PlanEvictAll();
  ASSERT_TRUE(all.ok());
  m.Commit(*all);
  m.CheckInvariants();
  EXPECT_EQ(m.pages().free_count(), m.pages().capacity());
  EXPECT_EQ(m.checkpoints().size(), 0);
}

}  // namespace
}  // namespace rw::memory
