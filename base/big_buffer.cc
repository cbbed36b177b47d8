#include "base/big_buffer.h"

#include <cstdint>
#include <sys/mman.h>

namespace rw::internal {
namespace {

constexpr size_t kHuge = size_t{2} << 20;

size_t MappedBytes(size_t bytes) { return (bytes + kHuge - 1) / kHuge * kHuge; }

}  // namespace

void* MapBig(size_t bytes) {
  const size_t len = MappedBytes(bytes);
  // Over-map by one huge page and trim both ends, so the block starts on a 2 MiB boundary.
  void* raw = mmap(nullptr, len + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const auto base = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t start = (base + kHuge - 1) / kHuge * kHuge;
  if (start > base) munmap(raw, start - base);
  const uintptr_t end = base + len + kHuge;
  if (end > start + len) munmap(reinterpret_cast<void*>(start + len), end - (start + len));
  // Advice only: where transparent huge pages are off, the block is plain 4 KiB pages.
  madvise(reinterpret_cast<void*>(start), len, MADV_HUGEPAGE);
  return reinterpret_cast<void*>(start);
}

void UnmapBig(void* p, size_t bytes) {
  if (p != nullptr) munmap(p, MappedBytes(bytes));
}

}  // namespace rw::internal
