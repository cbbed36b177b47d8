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
// True when DotF32 runs the AVX2+FMA code.
bool HasAvx2Fma();
// AVX-512 F, DQ, VL, BW and VNNI (the set the 512-bit kernels use), unless REWIND_NO_AVX512 is set to anything
// but 0 (like-for-like comparisons with AVX2 builds; the 512-bit kernels give the bits of the 256-bit ones).
bool HasAvx512();

}  // namespace rw::kernels
