#include "memory/page_pool.h"

#include "base/check.h"

namespace rw::memory {

PagePool::PagePool(int32_t capacity) : refs_(static_cast<size_t>(capacity), 0) {
  REWIND_CHECK(capacity >= 0);
  for (PageId i = 0; i < capacity; ++i) free_.insert(free_.end(), i);
}

std::vector<PageId> PagePool::PeekFree(int32_t n) const {
  REWIND_CHECK_MSG(n >= 0 && n <= free_count(), "PeekFree(%d) with %d free", n, free_count());
  std::vector<PageId> out;
  out.reserve(static_cast<size_t>(n));
  for (auto it = free_.begin(); static_cast<int32_t>(out.size()) < n; ++it) out.push_back(*it);
  return out;
}

void PagePool::Take(PageId id) {
  REWIND_CHECK_MSG(id >= 0 && id < capacity(), "page %d out of range", id);
  REWIND_CHECK_MSG(refs_[static_cast<size_t>(id)] == 0, "page %d taken twice", id);
  refs_[static_cast<size_t>(id)] = 1;
  free_.erase(id);
}

PageId PagePool::Alloc() {
  REWIND_CHECK_MSG(!free_.empty(), "page pool exhausted (plans must check free_count first)");
  PageId id = *free_.begin();
  Take(id);
  return id;
}

void PagePool::Ref(PageId id) {
  REWIND_CHECK_MSG(id >= 0 && id < capacity(), "page %d out of range", id);
  REWIND_CHECK_MSG(refs_[static_cast<size_t>(id)] > 0, "Ref of free page %d", id);
  ++refs_[static_cast<size_t>(id)];
}

bool PagePool::Unref(PageId id) {
  REWIND_CHECK_MSG(id >= 0 && id < capacity(), "page %d out of range", id);
  int32_t& r = refs_[static_cast<size_t>(id)];
  REWIND_CHECK_MSG(r > 0, "page %d freed twice (ref count underflow)", id);
  if (--r > 0) return false;
  free_.insert(id);
  return true;
}

int32_t PagePool::RefCount(PageId id) const {
  REWIND_CHECK_MSG(id >= 0 && id < capacity(), "page %d out of range", id);
  return refs_[static_cast<size_t>(id)];
}

void PagePool::CheckCounts(const std::vector<int32_t>& expected) const {
  REWIND_CHECK(expected.size() == refs_.size());
  int32_t n_free = 0;
  for (size_t i = 0; i < refs_.size(); ++i) {
    REWIND_CHECK_MSG(refs_[i] == expected[i], "page %zu: ref count %d, holders %d", i, refs_[i], expected[i]);
    if (refs_[i] == 0) {
      ++n_free;
      REWIND_CHECK_MSG(free_.count(static_cast<PageId>(i)) == 1, "page %zu free but not in the free set", i);
    }
  }
  REWIND_CHECK(n_free == free_count());
}

}  // namespace rw::memory
