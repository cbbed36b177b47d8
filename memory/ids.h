// Handles the memory bookkeeping hands out. They are plain integers: memory/ knows ids, never tensors.
// Storage classes outside memory/ index their buffers by these ids.
#pragma once

#include <cstdint>

namespace rw::memory {

using PageId = int32_t;        // one attention page: page_tokens positions of every attention layer's K and V
using SlotId = int32_t;        // one live recurrent-state buffer (all recurrent layers)
using CheckpointId = int32_t;  // one immutable recurrent-state copy, taken at one position of one prefix
using SeqId = int32_t;         // one sequence (a request's evaluation context)
using NodeId = int32_t;        // one prefix-tree node

inline constexpr int32_t kNone = -1;

}  // namespace rw::memory
