// Admission control (docs/cache-budget.md): the budget is never exceeded. A sequence acquired with a reservation
// holds back the budget its pages may need, is admitted only when that fits beside the other reservations, and
// then always finds room for its appends by evicting cache entries; checkpoints and other cache entries get
// only what no reservation holds back.
#include <gtest/gtest.h>

#include "memory/memory_manager.h"
#include "memory/memory_test_util.h"

namespace rw::memory {
namespace {

using namespace rw::memory::testing;

// Pages of 4 tokens / 10 B, checkpoints of 100 B; a 150 B budget holds one checkpoint and 5 pages.
MemoryConfig TinyConfig() { return SmallConfig(/*budget=*/150, /*slots=*/8); }

std::vector<int32_t> Tokens(int32_t n, int32_t value) { return std::vector<int32_t>(static_cast<size_t>(n), value); }

Expected<AcquirePlan> PlanWithReserve(MemoryManager& m, const std::vector<int32_t>& prompt, int32_t reserve) {
  return m.PlanAcquire(prompt, /*use_cache=*/true, reserve);
}

SeqId AcquireReserved(MemoryManager& m, const std::vector<int32_t>& prompt, int32_t reserve) {
  auto p = PlanWithReserve(m, prompt, reserve);
  EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error().message);
  SeqId s = m.Commit(*p);
  m.CheckInvariants();
  return s;
}

// Makes room the way the engine does (RoomForAppends), then appends.
void AppendWithRoom(MemoryManager& m, SeqId s, const std::vector<int32_t>& toks) {
  const std::pair<SeqId, int32_t> grow{s, static_cast<int32_t>(toks.size())};
  const MemoryManager::Room need = m.RoomForAppends({&grow, 1});
  auto room = m.PlanMakeRoom(need.bytes, need.pages);
  ASSERT_TRUE(room.ok()) << room.error().message;
  m.Commit(*room);
  m.CheckInvariants();
  Append(m, s, toks);
}

TEST(Budget, ReservationSizesFollowThePages) {
  MemoryManager m(TinyConfig());
  EXPECT_EQ(m.ReserveBytes(1), 20);   // one page plus the copy-on-write page
  EXPECT_EQ(m.ReserveBytes(16), 50);
  EXPECT_EQ(m.MaxReserveTokens(), 56);  // 15 pages, one kept for copy-on-write: 14 * 4 tokens
  EXPECT_EQ(m.config().MaxPages(), 15);  // the pool never holds more than the budget
}

TEST(Budget, ARequestThatCouldNeverFitIsRefusedAtOnce) {
  MemoryManager m(TinyConfig());
  auto p = PlanWithReserve(m, Tokens(5, 1), 57);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().kind, ErrorKind::kOutOfRange);
  EXPECT_NE(p.error().message.find("at most 56 tokens fit"), std::string::npos) << p.error().message;
  EXPECT_TRUE(PlanWithReserve(m, Tokens(5, 1), 56).ok());
}

TEST(Budget, ARequestWaitsWhileOthersReservationsLeaveTooLittle) {
  MemoryManager m(TinyConfig());
  SeqId a = AcquireReserved(m, Tokens(5, 1), 40);  // admitted for 11 pages = 110 B
  // Held back: its 10 table pages, not allocated yet (no shared last page: no copy-on-write to come).
  EXPECT_EQ(m.HeadroomBytes(), 100);
  const std::string before = m.DebugString();
  auto b = PlanWithReserve(m, Tokens(5, 2), 20);    // 60 B more: 160 B > 150 B
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.error().kind, ErrorKind::kResourceExhausted);
  EXPECT_EQ(m.DebugString(), before);
  SeqId c = AcquireReserved(m, Tokens(5, 3), 8);    // 30 B more: 130 B fits
  Release(m, a, false);
  EXPECT_TRUE(PlanWithReserve(m, Tokens(5, 2), 20).ok());  // a's reservation ended
  Release(m, c, false);
}

TEST(Budget, AppendsInsideAReservationAlwaysFindRoomByEvictingTheCache) {
  MemoryManager m(TinyConfig());
  RunAndInsert(m, Tokens(8, 1), {8});  // tree: 2 pages + a checkpoint at 8 = 120 B, all evictable
  ASSERT_EQ(m.used_bytes(), 120);
  SeqId s = AcquireReserved(m, Tokens(9, 2), 48);  // 13 pages = 130 B: admitted, the cache will make way
  for (int32_t i = 0; i < 12; ++i) {
    AppendWithRoom(m, s, Tokens(4, 2));
    EXPECT_LE(m.used_bytes(), 150);
  }
  EXPECT_EQ(m.sequence(s).pos(), 48);
  EXPECT_FALSE(m.HasEvictable());
  EXPECT_EQ(m.HeadroomBytes(), 0);
  // Past the reservation there is no promise: the append fails cleanly and changes nothing.
  const std::string before = m.DebugString();
  auto more = m.PlanAppend(s, Tokens(16, 2));  // 40 B, 30 B free
  ASSERT_FALSE(more.ok());
  EXPECT_EQ(more.error().kind, ErrorKind::kResourceExhausted);
  EXPECT_EQ(m.DebugString(), before);
  Release(m, s, true);
  EXPECT_LE(m.used_bytes(), 150);
}

TEST(Budget, ASharedLastPageHoldsBackItsCopyOnWritePage) {
  MemoryManager m(TinyConfig());
  RunAndInsert(m, Tokens(6, 1), {6});  // 2 pages (the second holds 2 of 4 tokens) + checkpoint at 6
  SeqId s = AcquireReserved(m, Tokens(9, 1), 12);
  ASSERT_EQ(m.sequence(s).pos(), 6);
  // 3 pages of 12 tokens, 2 in the table, plus the copy of the shared half-filled page to come.
  EXPECT_EQ(m.HeadroomBytes(), 20);
  AppendWithRoom(m, s, Tokens(1, 1));
  EXPECT_EQ(m.HeadroomBytes(), 10);  // copied: the page is its own now
  Release(m, s, false);
}

TEST(Budget, CheckpointsAndOtherSequencesNeverTakeReservedRoom) {
  MemoryManager m(TinyConfig());
  SeqId a = AcquireReserved(m, Tokens(5, 1), 20);  // 60 B: 50 B of headroom after the first page
  AppendWithRoom(m, a, Tokens(4, 1));
  EXPECT_EQ(m.used_bytes(), 10);
  EXPECT_EQ(m.HeadroomBytes(), 40);
  // 100 B of checkpoint beside 10 B used and 40 B held back: exactly the budget.
  EXPECT_EQ(m.CheckpointRoom(), 140);
  TakeCheckpoint(m, a);
  EXPECT_EQ(m.used_bytes(), 110);
  // A sequence without a reservation may use only what is neither used nor held back: nothing here.
  SeqId b = Acquire(m, Tokens(3, 9));
  auto pb = m.PlanAppend(b, Tokens(2, 9));
  ASSERT_FALSE(pb.ok());
  EXPECT_EQ(pb.error().kind, ErrorKind::kResourceExhausted);
  // a still grows to its reservation.
  for (int32_t i = 0; i < 4; ++i) AppendWithRoom(m, a, Tokens(4, 1));
  EXPECT_EQ(m.used_bytes(), 150);
  EXPECT_EQ(m.HeadroomBytes(), 0);
  Release(m, b, false);
  Release(m, a, false);
}

TEST(Budget, EndingAReservationFreesItForTheCache) {
  MemoryManager m(TinyConfig());
  SeqId a = AcquireReserved(m, Tokens(5, 1), 40);
  AppendWithRoom(m, a, Tokens(4, 1));
  EXPECT_FALSE(m.PlanCheckpoint(a).ok());  // 10 B used + 100 B held back + 100 B > 150 B
  m.DropReservation(a);
  EXPECT_EQ(m.HeadroomBytes(), 0);
  TakeCheckpoint(m, a);  // the final checkpoint of a finished request is cache like any other
  Release(m, a, true);
  CacheHit hit;
  SeqId again = Acquire(m, Tokens(9, 1), &hit);
  EXPECT_EQ(hit.resume_pos, 4);
  EXPECT_EQ(hit.source, StateSource::kCheckpoint);
  Release(m, again, false);
}

// A pool scarcer than the budget bounds the reservations too: refused at admission, not failed mid-request.
TEST(Budget, AReservationMustFitThePagePoolToo) {
  MemoryConfig c = TinyConfig();
  c.max_pages = 6;  // the budget alone would hold 15
  MemoryManager m(c);
  EXPECT_EQ(m.MaxReserveTokens(), 20);  // 5 pages and the copy-on-write one
  auto p = PlanWithReserve(m, Tokens(5, 1), 21);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().kind, ErrorKind::kOutOfRange);
  SeqId a = AcquireReserved(m, Tokens(5, 1), 12);  // its table of 3 pages held back
  auto b = PlanWithReserve(m, Tokens(5, 2), 12);   // 3 + 1 more: 7 > 6 pages, though 70 B fit the budget
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.error().kind, ErrorKind::kResourceExhausted);
  AppendWithRoom(m, a, Tokens(7, 1));
  Release(m, a, false);
}

// Pages apart (a GPU: pages in device memory, checkpoints in host memory): pages draw on the pool alone and
// checkpoints on the byte budget alone, and the reservations hold back pages.
TEST(Budget, PagesApartDrawOnThePoolAndCheckpointsOnTheBudget) {
  MemoryConfig c = TinyConfig();  // 150 B: one checkpoint of 100 B
  c.pages_apart = true;
  c.max_pages = 40;
  MemoryManager m(c);
  EXPECT_EQ(m.config().MaxPages(), 40);
  EXPECT_EQ(m.MaxReserveTokens(), 39 * 4);
  EXPECT_EQ(m.ReserveBytes(100), 0);
  SeqId a = AcquireReserved(m, Tokens(5, 1), 100);  // admitted for 25 + 1 of the 40 pages
  EXPECT_EQ(m.HeadroomPages(), 25);                 // its table, held back
  EXPECT_EQ(m.HeadroomBytes(), 0);
  AppendWithRoom(m, a, Tokens(65, 1));             // 17 pages taken, 8 held back, no budget byte used
  EXPECT_EQ(m.HeadroomPages(), 8);
  EXPECT_EQ(m.used_bytes(), 0);
  TakeCheckpoint(m, a);                            // the budget holds the checkpoint
  EXPECT_EQ(m.used_bytes(), 100);
  auto b = PlanWithReserve(m, Tokens(5, 2), 60);   // 15 + 1 pages more: 17 + 8 + 16 > 40
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.error().kind, ErrorKind::kResourceExhausted);
  SeqId d = AcquireReserved(m, Tokens(5, 3), 48);  // 12 + 1 more: 17 + 8 + 13 <= 40
  auto e = m.PlanCheckpoint(d);                    // a second checkpoint does not fit the 150 B
  EXPECT_FALSE(e.ok());
  Release(m, d, false);
  Release(m, a, false);
}

}  // namespace
}  // namespace rw::memory
