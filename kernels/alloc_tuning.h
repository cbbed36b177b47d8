// Scratch memory for the forward pass. Layers need [N][width] buffers on every call; allocating (and zeroing)
// fresh std::vectors each time cost a 512-token prefill about a sixth of its time in page faults and memset.
// A ScratchBuffer keeps its memory between calls, never shrinks and never initialises it: callers write every
// element they read. Owners keep them thread_local (one set per calling thread), so concurrent forwards on
// different threads never share one. No effect on results.
#pragma once

#include <cstddef>

#include "base/big_buffer.h"

namespace rw::kernels {

template <class T>
class ScratchBuffer {
 public:
  // At least n elements, uninitialised (contents of earlier calls may remain). Invalidates earlier pointers
  // only when it grows.
  T* Get(size_t n) {
    if (n > data_.size()) {
      BigVector<T>().swap(data_);  // release first: the old and the new block are never both held
      data_.resize(n);             // default-initialised: no zero fill (huge pages when large)
    }
    return data_.data();
  }

 private:
  BigVector<T> data_;
};

}  // namespace rw::kernels
