// Checkpoints: immutable copies of all recurrent layers' state, taken after token pos-1 of one token prefix.
// This table holds their bookkeeping (position, prefix hash, size, holders); the bytes live in a storage class
// outside memory/, indexed by CheckpointId. I2: a checkpoint serves exactly `pos` of exactly the prefix whose
// rw::HashTokens equals `prefix_hash`. Ids are never reused.
#pragma once

#include <cstdint>
#include <map>
#include <span>

#include "memory/ids.h"

namespace rw::memory {

struct Checkpoint {
  CheckpointId id = kNone;
  int32_t pos = 0;           // the state after tokens [0, pos)
  uint64_t prefix_hash = 0;  // rw::HashTokens(tokens[0, pos))
  int64_t bytes = 0;
  int32_t refs = 0;          // holders: sequences and tree nodes
  uint64_t last_use = 0;     // logical clock
};

class CheckpointTable {
 public:
  CheckpointId next_id() const { return next_id_; }
  // Adds checkpoint `id` (must equal next_id()) with one reference.
  void Add(CheckpointId id, int32_t pos, uint64_t prefix_hash, int64_t bytes, uint64_t now);
  void Ref(CheckpointId id);
  bool Unref(CheckpointId id);  // true when the last holder let go (the caller frees the bytes). Underflow aborts.
  const Checkpoint& Get(CheckpointId id) const;
  bool Contains(CheckpointId id) const { return table_.count(id) != 0; }
  void Touch(CheckpointId id, uint64_t now);
  int64_t total_bytes() const { return total_bytes_; }
  int32_t size() const { return static_cast<int32_t>(table_.size()); }
  const std::map<CheckpointId, Checkpoint>& all() const { return table_; }
  // I2 check: does this checkpoint serve the given prefix (length pos and hash both match)?
  static bool Serves(const Checkpoint& c, std::span<const int32_t> tokens);
  // Aborts unless each checkpoint's refs equals expected[id] and no holder names a missing checkpoint.
  void CheckCounts(const std::map<CheckpointId, int32_t>& expected) const;

 private:
  std::map<CheckpointId, Checkpoint> table_;
  CheckpointId next_id_ = 0;
  int64_t total_bytes_ = 0;
};

}  // namespace rw::memory
