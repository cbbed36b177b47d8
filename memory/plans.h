// Plans: what a mutation would do, computed without side effects (STYLE.md 8). A plan may be thrown away.
// MemoryManager::Commit(plan) applies the bookkeeping; afterwards the caller performs plan.ops on storage in
// order. Every plan carries the manager's generation: committing a stale plan aborts.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "memory/data_ops.h"
#include "memory/ids.h"
#include "memory/prefix_tree.h"
#include "memory/resume.h"
#include "memory/sequence.h"

namespace rw::memory {

// I4: what a request reuses, from where, and why it is not more.
struct CacheHit {
  int32_t lcp = 0;             // longest common prefix with anything cached (tree or idle sequences)
  int32_t resume_pos = 0;      // exact state position the evaluation resumes from
  StateSource source = StateSource::kZero;
  std::string reason;          // "no shared prefix", "nearest checkpoint at 1200, LCP at 1450", ...
};

struct TruncatePlan {
  uint64_t generation = 0;
  SeqId seq = kNone;
  int32_t target = 0;               // the position asked for
  ExactState state;                 // state.pos = resume position <= target
  std::vector<int32_t> refeed;      // tokens [resume, target): the caller evaluates them again
  int32_t keep_pages = 0;
  std::vector<CheckpointId> drop_ckpts;  // sequence checkpoints past the resume position
  ReplayWindow replay_after;
  // The replay ran in place in the spare slot (no state copy), which therefore becomes the live slot; the old
  // live slot becomes the spare. The window is spent: the batch-start state no longer exists.
  bool swap_slots = false;
  std::vector<DataOp> ops;
};

struct AppendPlan {
  uint64_t generation = 0;
  SeqId seq = kNone;
  int32_t pos0 = 0;                 // position of tokens[0]
  std::vector<int32_t> tokens;
  std::vector<PageId> take;         // pages allocated by the commit (free now)
  int32_t cow_index = -1;           // page-table index replaced by a copy (shared, partly filled last page)
                                    // (the page table after commit: MemoryManager::sequence(seq).pages; the plan
                                    // holds only the new pages, so an append costs O(tokens), not O(position))
  SlotId state_in = kNone;          // forward reads the state at pos0 here...
  SlotId state_out = kNone;         // ...and writes the state at pos0 + n here (== state_in: single slot)
  int64_t bytes = 0;                // budget bytes the commit adds
  std::vector<DataOp> ops;          // copy-on-write page copies, before the forward
};

struct CheckpointPlan {
  uint64_t generation = 0;
  SeqId seq = kNone;
  int32_t pos = 0;
  CheckpointId id = kNone;          // new id, or the existing checkpoint at pos (then ops is empty)
  bool exists = false;
  std::vector<DataOp> ops;          // SaveCheckpointOp
};

struct AcquirePlan {
  uint64_t generation = 0;
  CacheHit hit;
  SeqId seq = kNone;                // the new sequence's id, or the adopted idle sequence
  bool adopt = false;               // resume an idle sequence's state (then `truncate` is set)
  std::optional<TruncatePlan> truncate;
  NodeId node = kNone;              // tree node ending at resume_pos (leased), kNone at 0
  std::vector<int32_t> prefix;      // prompt[0, resume_pos)
  std::vector<PageId> pages;        // shared page table of the prefix
  std::vector<CheckpointId> ckpts;  // checkpoints on the path at or before resume_pos
  SlotId live = kNone, spare = kNone;
  int32_t reserve = 0;              // the sequence's reservation (tokens)
  std::vector<DataOp> ops;          // restore or zero the live slot
};

struct ForkPlan {
  uint64_t generation = 0;
  SeqId src = kNone, seq = kNone;
  SlotId live = kNone, spare = kNone;
  std::vector<DataOp> ops;          // CopyStateOp
};

struct ReleasePlan {
  uint64_t generation = 0;
  SeqId seq = kNone;
  bool insert = false;              // hand tokens, pages and checkpoints to the prefix tree
  std::vector<DataOp> ops;          // FreeCheckpointOp for checkpoints nobody keeps
};

struct EvictPlan {
  uint64_t generation = 0;
  std::vector<TreeRemoval> removals;
  int64_t bytes_freed = 0;
  int32_t pages_freed = 0;
  std::vector<DataOp> ops;          // FreeCheckpointOp
};

}  // namespace rw::memory
