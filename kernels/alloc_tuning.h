// Process-wide allocator tuning for the forward pass. Layers allocate their [N][width] scratch vectors per call;
// with glibc's defaults a 512-token prefill got those as fresh mmap()s or re-grown heap tops every time and
// spent a quarter of its time in page faults and zeroing new pages. Keeping freed memory (no trimming, mmap only
// above 32 MiB) makes the next call reuse warm pages. No effect on results.
#pragma once

namespace rw::kernels {

// Idempotent and thread-safe; called by ThreadPool's constructor.
void TuneAllocatorForScratch();

}  // namespace rw::kernels
