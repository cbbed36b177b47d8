#include "memory/memory_config.h"

#include <string>

namespace rw::memory {

Status MemoryConfig::Validate() const {
  if (page_tokens < 1 || page_tokens > 4096)
    return Error::InvalidArgument("page_tokens must be in [1, 4096], got " + std::to_string(page_tokens));
  if (page_bytes <= 0) return Error::InvalidArgument("page_bytes must be positive");
  if (state_bytes <= 0) return Error::InvalidArgument("state_bytes must be positive");
  if (pages_apart) {
    if (max_pages < 2) return Error::InvalidArgument("a page pool apart from the budget needs max_pages >= 2");
    if (budget_bytes < state_bytes)
      return Error::InvalidArgument("memory budget " + std::to_string(budget_bytes) +
                                    " B is smaller than one checkpoint (" + std::to_string(state_bytes) + " B)");
  } else {
    if (budget_bytes < page_bytes)
      return Error::InvalidArgument("memory budget " + std::to_string(budget_bytes) +
                                    " B is smaller than one page (" + std::to_string(page_bytes) + " B)");
    if (budget_bytes / page_bytes > (int64_t{1} << 30)) return Error::InvalidArgument("too many pages");
  }
  if (max_slots < 1 || max_slots > (1 << 20)) return Error::InvalidArgument("max_slots must be in [1, 2^20]");
  if (max_pages < 0) return Error::InvalidArgument("max_pages must be >= 0");
  if (half_life < 1) return Error::InvalidArgument("half_life must be positive");
  return Status::Ok();
}

}  // namespace rw::memory
