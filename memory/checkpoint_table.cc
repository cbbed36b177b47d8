#include "memory/checkpoint_table.h"

#include "base/check.h"
#include "base/hash.h"

namespace rw::memory {

void CheckpointTable::Add(CheckpointId id, int32_t pos, uint64_t prefix_hash, int64_t bytes, uint64_t now) {
  REWIND_CHECK_MSG(id == next_id_, "checkpoint id %d, expected %d (stale plan?)", id, next_id_);
  REWIND_CHECK(pos >= 0 && bytes > 0);
  table_[id] = Checkpoint{id, pos, prefix_hash, bytes, 1, now};
  ++next_id_;
  total_bytes_ += bytes;
}

void CheckpointTable::Ref(CheckpointId id) {
  auto it = table_.find(id);
  REWIND_CHECK_MSG(it != table_.end(), "Ref of unknown checkpoint %d", id);
  ++it->second.refs;
}

bool CheckpointTable::Unref(CheckpointId id) {
  auto it = table_.find(id);
  REWIND_CHECK_MSG(it != table_.end(), "checkpoint %d freed twice", id);
  REWIND_CHECK(it->second.refs > 0);
  if (--it->second.refs > 0) return false;
  total_bytes_ -= it->second.bytes;
  table_.erase(it);
  return true;
}

const Checkpoint& CheckpointTable::Get(CheckpointId id) const {
  auto it = table_.find(id);
  REWIND_CHECK_MSG(it != table_.end(), "unknown checkpoint %d", id);
  return it->second;
}

void CheckpointTable::Touch(CheckpointId id, uint64_t now) {
  auto it = table_.find(id);
  REWIND_CHECK(it != table_.end());
  it->second.last_use = now;
}

bool CheckpointTable::Serves(const Checkpoint& c, std::span<const int32_t> tokens) {
  if (static_cast<int64_t>(tokens.size()) < c.pos) return false;
  return HashTokens(tokens.first(static_cast<size_t>(c.pos))) == c.prefix_hash;
}

void CheckpointTable::CheckCounts(const std::map<CheckpointId, int32_t>& expected) const {
  int64_t bytes = 0;
  for (const auto& [id, c] : table_) {
    auto it = expected.find(id);
    int32_t holders = it == expected.end() ? 0 : it->second;
    REWIND_CHECK_MSG(c.refs == holders, "checkpoint %d: refs %d, holders %d", id, c.refs, holders);
    REWIND_CHECK(c.id == id && c.refs > 0);
    bytes += c.bytes;
  }
  for (const auto& [id, n] : expected) REWIND_CHECK_MSG(table_.count(id) == 1, "holder of dead checkpoint %d", id);
  REWIND_CHECK(bytes == total_bytes_);
}

}  // namespace rw::memory
