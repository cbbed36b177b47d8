// Whole-row IEEE half <-> float conversion for the F16 KV cache. Both directions are exactly the scalar
// conversions of kernels/f16.h (half -> float is exact; float -> half rounds to nearest even), so the F16C path
// (picked at run time) and the portable loop give identical bits: no effect on any result, only on speed.
#pragma once

#include <cstdint>

namespace rw::kernels {

// dst[i] = HalfToFloat(src[i]), i < n.
void HalfToFloatRow(const uint16_t* src, float* dst, int64_t n);
// dst[i] = FloatToHalf(src[i]), i < n.
void FloatToHalfRow(const float* src, uint16_t* dst, int64_t n);

}  // namespace rw::kernels
