// Sizes and limits of the memory bookkeeping: data read once at the edge, validated before any allocation.
#pragma once

#include <cstdint>

#include "base/expected.h"

namespace rw::memory {

struct MemoryConfig {
  int32_t page_tokens = 32;      // token positions per attention page
  int64_t page_bytes = 0;        // bytes of one page (K and V of all attention layers); > 0
  int64_t state_bytes = 0;       // bytes of one recurrent state (= one checkpoint); > 0
  int64_t budget_bytes = 0;      // one budget for live pages + live checkpoints (only checkpoints if pages_apart)
  int32_t max_slots = 8;         // live recurrent-state slots (a sequence holds 1 or 2)
  int64_t half_life = 1024;      // eviction aging: a score halves every half_life clock ticks
  int32_t max_pages = 0;         // page pool size; 0 = budget_bytes / page_bytes (the budget on pages alone)
  // Pages live in memory of their own (a GPU's): the pool is max_pages (> 0) alone, and budget_bytes bounds
  // the checkpoints only (docs/cache-budget.md, "Two memories"). The policy does not learn where; only that
  // pages do not draw on the byte budget.
  bool pages_apart = false;

  // Budget bytes one live page costs.
  int64_t PageCharge() const { return pages_apart ? 0 : page_bytes; }
  // Pages the storage must provide.
  int32_t MaxPages() const {
    if (pages_apart) return max_pages;
    int64_t by_budget = budget_bytes / page_bytes;
    return static_cast<int32_t>(max_pages > 0 && max_pages < by_budget ? max_pages : by_budget);
  }
  Status Validate() const;
};

}  // namespace rw::memory
