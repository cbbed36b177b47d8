// Bookkeeping of one sequence. Fields are written only by MemoryManager commits.
#pragma once

#include <cstdint>
#include <vector>

#include "memory/ids.h"
#include "memory/prefix_tree.h"

namespace rw::memory {

// The last evaluated batch: `spare` holds the state at `start`, the storage's replay log holds what the
// recurrent updates of tokens [start, start + len) consumed. Rollback to any position in [start, start+len] is
// exact without a model forward.
struct ReplayWindow {
  bool valid = false;
  int32_t start = 0;
  int32_t len = 0;
};

struct Sequence {
  SeqId id = kNone;
  std::vector<int32_t> tokens;            // evaluated tokens: attention entries exist for [0, size)
  std::vector<PageId> pages;              // [ceil(size / page_tokens)] page table
  SlotId live = kNone;                    // recurrent state exactly at position size (I2)
  SlotId spare = kNone;                   // batch-start state (kNone: single-slot sequence, no replay)
  ReplayWindow replay;
  std::vector<CheckpointId> checkpoints;  // ascending pos, all <= size, all serving `tokens` (hash-checked)
  Lease lease;                            // pins the tree path the sequence was acquired from
  int32_t reserve = 0;                    // tokens whose pages the budget holds back for it (0: none)
  bool idle = false;                      // finished but kept; a later request may adopt its live state
  uint64_t last_use = 0;
  // rw::HashTokens(tokens[0, hashed)), extended as checkpoints need it, so that a checkpoint every N tokens of a
  // long sequence hashes each token once instead of the whole prefix each time (reset by a truncate below it).
  int32_t hashed = 0;
  uint64_t hash = 0;

  int32_t pos() const { return static_cast<int32_t>(tokens.size()); }
};

}  // namespace rw::memory
