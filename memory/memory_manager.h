// The memory bookkeeping of the engine: page pool, state slots, checkpoints, sequences and the prefix tree,
// under one byte budget for pages + checkpoints. Every mutation is Plan*() (pure, may fail with an input or
// budget error, changes nothing) followed by Commit() (bookkeeping only) and then the plan's data operations,
// which the storage owner performs in order (engine/hybrid_cache.h). Single-threaded: one engine thread owns it.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "base/expected.h"
#include "memory/checkpoint_table.h"
#include "memory/memory_config.h"
#include "memory/page_pool.h"
#include "memory/plans.h"
#include "memory/prefix_tree.h"
#include "memory/resume.h"
#include "memory/sequence.h"
#include "memory/slot_pool.h"

namespace rw::memory {

class MemoryManager {
 public:
  explicit MemoryManager(const MemoryConfig& config);  // config must be valid
  MemoryManager(const MemoryManager&) = delete;
  MemoryManager& operator=(const MemoryManager&) = delete;

  // --- Requests -----------------------------------------------------------------------------------------
  // A new sequence for `prompt`, resuming from the longest exact prefix in the tree or an idle sequence
  // (hybrid hit rule; always < prompt.size(): one token must be evaluated). use_cache=false starts at 0.
  // reserve_tokens > 0 admits the sequence only if the budget can hold it up to that many tokens beside every
  // other reservation (see Reservations below): kOutOfRange if it never could, kResourceExhausted while the
  // other running sequences leave too little (the caller waits for them).
  Expected<AcquirePlan> PlanAcquire(std::span<const int32_t> prompt, bool use_cache = true,
                                    int32_t reserve_tokens = 0) const;
  SeqId Commit(const AcquirePlan& plan);
  // Where would `candidate` resume in this sequence (limit <= candidate.size())? Exact by construction.
  Agreement FindResume(SeqId seq, std::span<const int32_t> candidate, int32_t limit) const;
  // What the tree alone offers (for reports and placement).
  TreeHit FindTreeResume(std::span<const int32_t> prompt) const { return tree_.FindResume(prompt); }

  // --- Sequence mutations --------------------------------------------------------------------------------
  Expected<AppendPlan> PlanAppend(SeqId seq, std::span<const int32_t> tokens) const;
  // Pages appending n tokens would take (new pages plus a copy-on-write page) and the budget bytes they add.
  int32_t AppendPages(SeqId seq, int32_t n) const;
  int64_t AppendBytes(SeqId seq, int32_t n) const { return AppendPages(seq, n) * config_.PageCharge(); }
  void Commit(const AppendPlan& plan);
  // Checkpoint of the live state at the sequence's current position.
  Expected<CheckpointPlan> PlanCheckpoint(SeqId seq) const;
  void Commit(const CheckpointPlan& plan);
  // Roll back to n: exact at n through live/checkpoint/replay, else resume at the newest exact state c < n
  // and re-feed tokens [c, n) (plan.refeed). Never keeps attention entries past the resume point.
  Expected<TruncatePlan> PlanTruncate(SeqId seq, int32_t n) const;
  void Commit(const TruncatePlan& plan);
  Expected<ForkPlan> PlanFork(SeqId seq) const;
  SeqId Commit(const ForkPlan& plan);
  // Ends a sequence; insert=true hands its tokens, pages and checkpoints to the prefix tree.
  Expected<ReleasePlan> PlanRelease(SeqId seq, bool insert) const;
  void Commit(const ReleasePlan& plan);
  // Marks a sequence idle (adoptable by PlanAcquire) or busy again. No data changes.
  void SetIdle(SeqId seq, bool idle);
  // Ends a sequence's reservation (before its final checkpoint: the request is over). No data changes.
  void DropReservation(SeqId seq) { mut(seq).reserve = 0; }

  // --- Reservations (admission control, docs/cache-budget.md) ------------------------------------------------
  // The budget is never exceeded. A sequence acquired with a reservation of R tokens holds back the budget its
  // pages may need up to R, so appends inside a reservation always find room by evicting cache entries; the
  // cache (new checkpoints, imports) only gets what no reservation holds back.
  // Pages a sequence of up to `tokens` tokens may need (its page table plus one copy-on-write page), and the
  // budget bytes they cost.
  int32_t ReservePages(int32_t tokens) const { return PagesFor(tokens) + 1; }
  int64_t ReserveBytes(int32_t tokens) const { return int64_t{ReservePages(tokens)} * config_.PageCharge(); }
  // The longest sequence whose reservation fits in the budget and the page pool.
  int32_t MaxReserveTokens() const;
  // Reserved but not yet allocated: the sum over sequences of their reservation's pages not yet in their
  // table, and the budget bytes those pages cost.
  int32_t HeadroomPages() const { return RoomForAppends({}).pages; }
  int64_t HeadroomBytes() const { return RoomForAppends({}).bytes; }
  bool HasReservations() const;
  // What must be free before appending n tokens to each (seq, n) of one batch: their new pages plus what all
  // reservations still hold back afterwards, as free pages and as budget bytes. PlanAppend fails when fewer
  // are free.
  struct Room {
    int64_t bytes = 0;
    int32_t pages = 0;
  };
  Room RoomForAppends(std::span<const std::pair<SeqId, int32_t>> appends) const;
  // Bytes that must be free before a new checkpoint (PlanCheckpoint fails when fewer are).
  int64_t CheckpointRoom() const { return config_.state_bytes + HeadroomBytes(); }

  // --- Budget --------------------------------------------------------------------------------------------
  // Frees at least `bytes` by evicting tree entries in score order (eviction.h); Exhausted if impossible.
  Expected<EvictPlan> PlanEvict(int64_t bytes) const;
  Expected<EvictPlan> PlanEvictAll() const;  // everything evictable now
  // Evicts until `bytes` of budget and `pages` free pages are available (an empty plan when they already are).
  // Use before a plan that failed with kResourceExhausted: RoomForAppends(), CheckpointRoom().
  Expected<EvictPlan> PlanMakeRoom(int64_t bytes, int32_t pages) const;
  void Commit(const EvictPlan& plan);
  int64_t used_bytes() const;
  int64_t free_bytes() const { return config_.budget_bytes - used_bytes(); }
  // True when the tree holds an entry eviction could remove.
  bool HasEvictable() const { return !tree_.Candidates({}).empty(); }

  // --- Introspection ---------------------------------------------------------------------------------------
  const MemoryConfig& config() const { return config_; }
  const Sequence& sequence(SeqId id) const;
  bool has_sequence(SeqId id) const { return seqs_.count(id) != 0; }
  std::vector<SeqId> sequence_ids() const;
  const PrefixTree& tree() const { return tree_; }
  const PagePool& pages() const { return pages_; }
  const SlotPool& slots() const { return slots_; }
  const CheckpointTable& checkpoints() const { return ckpts_; }
  uint64_t generation() const { return generation_; }
  uint64_t now() const { return now_; }
  // Recomputes every reference count, size and position from scratch; aborts on any mismatch.
  void CheckInvariants() const;
  // A complete, deterministic description of the bookkeeping (tests compare it before/after failed plans).
  std::string DebugString() const;

 private:
  int32_t PagesFor(int32_t n) const { return (n + config_.page_tokens - 1) / config_.page_tokens; }
  // What sequence s still holds back of its reservation when it is `pos` tokens long.
  int32_t Headroom(const Sequence& s, int32_t pos) const;
  Sequence& mut(SeqId id);
  void Tick(uint64_t plan_generation);
  Expected<std::pair<SlotId, SlotId>> PickSlots() const;
  TruncatePlan MakeTruncate(const Sequence& s, int32_t n) const;
  void ApplyTruncate(Sequence& s, const TruncatePlan& plan);
  Expected<EvictPlan> PlanEvictImpl(int64_t bytes, int32_t pages, bool all) const;
  Expected<AcquirePlan> PlanAcquireAt(std::span<const int32_t> prompt, bool use_cache) const;  // no admission

  MemoryConfig config_;
  PagePool pages_;
  SlotPool slots_;
  CheckpointTable ckpts_;
  PrefixTree tree_;                  // before seqs_: leases die first
  std::map<SeqId, Sequence> seqs_;
  SeqId next_seq_ = 0;
  uint64_t generation_ = 0;          // bumped by every commit
  uint64_t now_ = 0;                 // logical clock
};

}  // namespace rw::memory
