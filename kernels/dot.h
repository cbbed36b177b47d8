// F32 dot products with one fixed reduction order (8 lanes x 4 accumulators, fixed final sum), the same on
// every call whatever the caller's batch shape. The AVX2 version and the portable version give identical bits
// (the portable one emulates the lanes with std::fma), so results do not even depend on the CPU.
#pragma once

#include <cstdint>

namespace rw::kernels {

// Σ a[i]·b[i], i < n.
float DotF32(const float* a, const float* b, int64_t n);
// The portable lane-emulating version (exposed for tests).
float DotF32Portable(const float* a, const float* b, int64_t n);

}  // namespace rw::kernels
