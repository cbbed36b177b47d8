// Live recurrent-state slots: a fixed set of buffers, each owned by exactly one sequence (no sharing: a
// recurrent state is updated in place). Deterministic order, like PagePool.
#pragma once

#include <cstdint>
#include <set>
#include <vector>

#include "memory/ids.h"

namespace rw::memory {

class SlotPool {
 public:
  explicit SlotPool(int32_t capacity);

  int32_t capacity() const { return static_cast<int32_t>(used_.size()); }
  int32_t free_count() const { return static_cast<int32_t>(free_.size()); }
  std::vector<SlotId> PeekFree(int32_t n) const;
  void Take(SlotId id);      // aborts if not free
  void Release(SlotId id);   // aborts if already free (double free)
  bool IsUsed(SlotId id) const;
  // Aborts unless exactly the slots in `owned` are in use (each once).
  void CheckOwned(const std::vector<SlotId>& owned) const;

 private:
  std::vector<bool> used_;  // [slot]
  std::set<SlotId> free_;
};

}  // namespace rw::memory
