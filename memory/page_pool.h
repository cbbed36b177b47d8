// Attention pages: a fixed pool of page ids with reference counts. A page is shared by every sequence and
// prefix-tree node whose page table holds it; it returns to the free set when the last holder lets go.
// Allocation order is deterministic (lowest free id first) so a plan can name the ids a commit will take.
#pragma once

#include <cstdint>
#include <set>
#include <vector>

#include "memory/ids.h"

namespace rw::memory {

class PagePool {
 public:
  explicit PagePool(int32_t capacity);

  int32_t capacity() const { return static_cast<int32_t>(refs_.size()); }
  int32_t free_count() const { return static_cast<int32_t>(free_.size()); }
  int32_t used_count() const { return capacity() - free_count(); }

  // The n ids that n calls to Alloc() would return, in order. n <= free_count().
  std::vector<PageId> PeekFree(int32_t n) const;
  // Takes a specific free page (ref count 1). Aborts if it is not free.
  void Take(PageId id);
  PageId Alloc();
  void Ref(PageId id);
  // Drops one reference; returns true when the page became free. Underflow aborts.
  bool Unref(PageId id);
  int32_t RefCount(PageId id) const;

  // Aborts unless every page's count equals expected[id] (recomputed by the owner from its holders).
  void CheckCounts(const std::vector<int32_t>& expected) const;

 private:
  std::vector<int32_t> refs_;  // [page] holders; 0 = free
  std::set<PageId> free_;      // ids with refs_ == 0
};

}  // namespace rw::memory
