#include "memory/slot_pool.h"

#include "base/check.h"

namespace rw::memory {

SlotPool::SlotPool(int32_t capacity) : used_(static_cast<size_t>(capacity), false) {
  REWIND_CHECK(capacity >= 0);
  for (SlotId i = 0; i < capacity; ++i) free_.insert(free_.end(), i);
}

std::vector<SlotId> SlotPool::PeekFree(int32_t n) const {
  REWIND_CHECK(n >= 0 && n <= free_count());
  std::vector<SlotId> out;
  for (auto it = free_.begin(); static_cast<int32_t>(out.size()) < n; ++it) out.push_back(*it);
  return out;
}

void SlotPool::Take(SlotId id) {
  REWIND_CHECK_MSG(id >= 0 && id < capacity(), "slot %d out of range", id);
  REWIND_CHECK_MSG(!used_[static_cast<size_t>(id)], "slot %d taken twice", id);
  used_[static_cast<size_t>(id)] = true;
  free_.erase(id);
}

void SlotPool::Release(SlotId id) {
  REWIND_CHECK_MSG(id >= 0 && id < capacity(), "slot %d out of range", id);
  REWIND_CHECK_MSG(used_[static_cast<size_t>(id)], "slot %d released twice", id);
  used_[static_cast<size_t>(id)] = false;
  free_.insert(id);
}

bool SlotPool::IsUsed(SlotId id) const {
  REWIND_CHECK(id >= 0 && id < capacity());
  return used_[static_cast<size_t>(id)];
}

void SlotPool::CheckOwned(const std::vector<SlotId>& owned) const {
  std::vector<int> count(used_.size(), 0);
  for (SlotId s : owned) {
    REWIND_CHECK(s >= 0 && s < capacity());
    ++count[static_cast<size_t>(s)];
  }
  for (size_t i = 0; i < used_.size(); ++i) {
    REWIND_CHECK_MSG(count[i] <= 1, "slot %zu owned by %d sequences", i, count[i]);
    REWIND_CHECK_MSG(used_[i] == (count[i] == 1), "slot %zu: used %d, owners %d", i, int(used_[i]), count[i]);
    REWIND_CHECK(used_[i] != (free_.count(static_cast<SlotId>(i)) == 1));
  }
}

}  // namespace rw::memory
