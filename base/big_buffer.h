// Memory for large buffers that are made often: recurrent-state snapshots, replay logs, persisted state bytes.
//
// Two costs of plain std::vector / std::string made them expensive (measured on the 2-core virtual machine,
// docs/performance.md): glibc serves anything over its mmap threshold (at most 32 MiB, lowered back to 128 KiB
// until a first free) with a fresh mapping whose every 4 KiB page faults on first touch (29 µs a page there:
// 0.14 GB/s, a 19 MiB snapshot 130 ms), and resize() zero-fills what it adds. BigAllocator maps blocks of
// kBigBytes or more itself, aligned to 2 MiB and with transparent huge pages requested (madvise; one fault per
// 2 MiB: the same first touch at 6 GB/s), keeps up to 512 MiB of freed blocks mapped for the next block of the
// same size (cleared before reuse: no value outlives its buffer), and constructs elements without initialising
// them. Smaller blocks go to operator new with T's
// alignment (over-aligned SIMD types included). Results never depend on it: every byte is written before it is
// read.
#pragma once

#include <cstddef>
#include <new>
#include <string_view>
#include <utility>
#include <vector>

namespace rw {

namespace internal {
inline constexpr size_t kBigBytes = size_t{1} << 20;
void* MapBig(size_t bytes);             // nullptr on failure
void UnmapBig(void* p, size_t bytes);
}  // namespace internal

template <class T>
class BigAllocator {
 public:
  using value_type = T;
  BigAllocator() noexcept = default;
  template <class U>
  BigAllocator(const BigAllocator<U>&) noexcept {}  // NOLINT: rebinding

  T* allocate(size_t n) {
    const size_t bytes = n * sizeof(T);
    if (bytes < internal::kBigBytes) return static_cast<T*>(::operator new(bytes, std::align_val_t{alignof(T)}));
    void* p = internal::MapBig(bytes);
    if (p == nullptr) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t n) noexcept {
    const size_t bytes = n * sizeof(T);
    if (bytes < internal::kBigBytes) ::operator delete(p, std::align_val_t{alignof(T)});
    else internal::UnmapBig(p, bytes);
  }
  // Default-initialise (no zero fill) when constructed without arguments.
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }

  template <class U>
  bool operator==(const BigAllocator<U>&) const noexcept {
    return true;
  }
};

template <class T>
using BigVector = std::vector<T, BigAllocator<T>>;
using BigBytes = BigVector<char>;

inline std::string_view AsView(const BigBytes& b) { return {b.data(), b.size()}; }

}  // namespace rw
