// The machine's memory read bandwidth as a decode sees it: every thread of a pool streaming its own large
// buffer at once (rewind bench reports decode against it; one core's memcpy is not the machine's bound).
#pragma once

#include <cstddef>

#include "kernels/thread_pool.h"

namespace rw::kernels {

// Read bytes per second with all pool.size() threads each summing its own buffer of bytes_per_thread (allocated
// and first touched by that thread, so it lives in its memory node); median of `reps` passes after one warm-up.
double MeasureReadBandwidth(ThreadPool& pool, size_t bytes_per_thread, int reps);

}  // namespace rw::kernels
