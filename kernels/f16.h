// IEEE half <-> float conversion (round to nearest even), used by the F16 KV cache.
#pragma once

#include <bit>
#include <cstdint>

namespace rw::kernels {

inline uint16_t FloatToHalf(float f) { return std::bit_cast<uint16_t>(static_cast<_Float16>(f)); }
inline float HalfToFloat(uint16_t h) { return static_cast<float>(std::bit_cast<_Float16>(h)); }

}  // namespace rw::kernels
