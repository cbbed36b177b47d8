// Scratch memory for the forward pass. Layers need [N][width] buffers on every call; allocating (and zeroing)
// fresh std::vectors each time cost a 512-token prefill about a sixth of its time in page faults and memset.
// A ScratchBuffer keeps its memory between calls, never shrinks and never initialises it: callers write every
// element they read. Owners keep them thread_local (one set per calling thread), so concurrent forwards on
// different threads never share one. No effect on results.
#pragma once

#include <cstddef>
#include <memory>

namespace rw::kernels {

template <class T>
class ScratchBuffer {
 public:
  // At least n elements, uninitialised (contents of earlier calls may remain). Invalidates earlier pointers
  // only when it grows.
  T* Get(size_t n) {
    if (n > cap_) {
      data_.reset(new T[n]);  // default-initialised: no zero fill
      cap_ = n;
    }
    return data_.get();
  }

 private:
  std::unique_ptr<T[]> data_;
  size_t cap_ = 0;
};

}  // namespace rw::kernels
