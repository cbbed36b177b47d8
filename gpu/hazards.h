// Which recorded commands need a barrier before them (gpu::Context, docs/gpu.md "Barriers"). A compute or transfer
// command needs one only when it reads or writes a byte range that a command recorded since the last barrier
// wrote, or writes a range such a command read: then the barrier orders it after all earlier work. Commands with
// none of these hazards (the projections of one input, which read the same rows and write different outputs) run
// without a barrier between them, so a GPU may overlap them. Pure bookkeeping: testable without a device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace rw::gpu {

// One buffer range a command touches: [begin, end) bytes of buffer `id` (a VkBuffer handle), written or only read.
struct Access {
  uint64_t id = 0;
  size_t begin = 0, end = 0;
  bool write = false;
};

class HazardTracker {
 public:
  // Past this many ranges since the last barrier, the next command gets a barrier anyway (bounds the search).
  static constexpr size_t kMaxTracked = 64;

  // Records a command touching `accesses`; returns true when it must be preceded by a barrier (the tracker then
  // forgets everything before it: the barrier orders it after all of that).
  bool Record(std::span<const Access> accesses) {
    bool barrier = unsynced_.size() + accesses.size() > kMaxTracked;
    for (size_t i = 0; i < accesses.size() && !barrier; ++i)
      for (const Access& u : unsynced_)
        if (Conflict(accesses[i], u)) {
          barrier = true;
          break;
        }
    if (barrier) unsynced_.clear();
    unsynced_.insert(unsynced_.end(), accesses.begin(), accesses.end());
    return barrier;
  }
  // Everything recorded has finished (the host waited for it): nothing needs ordering against it any more.
  void Clear() { unsynced_.clear(); }
  size_t tracked() const { return unsynced_.size(); }

  static bool Conflict(const Access& a, const Access& b) {
    return a.id == b.id && (a.write || b.write) && a.begin < b.end && b.begin < a.end;
  }

 private:
  std::vector<Access> unsynced_;
};

// Bit i set: binding i of set 0 may be written by the shader (a storage buffer not decorated NonWritable, on any
// variable bound there); read from the SPIR-V's decorations. Bindings the parser cannot classify count as written.
uint32_t WritableBindings(const uint32_t* words, size_t n_words);

}  // namespace rw::gpu
