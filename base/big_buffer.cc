#include "base/big_buffer.h"

#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <sys/mman.h>

namespace rw::internal {
namespace {

constexpr size_t kHuge = size_t{2} << 20;

// Freed blocks kept mapped for the next block of the same mapped size (the state bytes persisted per checkpoint,
// the store blob made of them, a replay log's buffer: the same sizes recur every request). Reusing them skips the
// kernel's zeroing and, on a virtual machine, the host's first-touch faults. At most kKeepBytes are kept.
// A reused block is cleared before it is handed out (one memset, at memory bandwidth: still far cheaper than the
// faults): it held another request's values (KV, states, bytes read from Redis), and nothing of them may outlive
// the buffer that held them, whatever a later reader does.
constexpr size_t kKeepBytes = size_t{512} << 20;

struct FreeBlocks {
  std::mutex mu;
  std::multimap<size_t, void*> blocks;  // mapped size -> block
  size_t bytes = 0;
};

FreeBlocks& Free() {
  static FreeBlocks* f = new FreeBlocks;  // never destroyed: blocks may be freed during static destruction
  return *f;
}

size_t MappedBytes(size_t bytes) { return (bytes + kHuge - 1) / kHuge * kHuge; }

}  // namespace

void* MapBig(size_t bytes) {
  const size_t len = MappedBytes(bytes);
  void* reused = nullptr;
  {
    FreeBlocks& f = Free();
    std::lock_guard<std::mutex> lock(f.mu);
    if (auto it = f.blocks.find(len); it != f.blocks.end()) {
      reused = it->second;
      f.blocks.erase(it);
      f.bytes -= len;
    }
  }
  if (reused != nullptr) {
    std::memset(reused, 0, len);
    return reused;
  }
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
  if (p == nullptr) return;
  const size_t len = MappedBytes(bytes);
  {
    FreeBlocks& f = Free();
    std::lock_guard<std::mutex> lock(f.mu);
    if (f.bytes + len <= kKeepBytes) {
      f.blocks.emplace(len, p);
      f.bytes += len;
      return;
    }
  }
  munmap(p, len);
}

}  // namespace rw::internal
