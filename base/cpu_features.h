// The CPU features the SIMD kernels use, probed once per process. Two environment switches turn levels off
// (read at the first probe):
//   REWIND_NO_AVX512=1  the 256-bit kernels only (they give the bits of the 512-bit ones);
//   REWIND_NO_AVX2=1    the scalar reference twins only: no AVX, AVX2, FMA, F16C or AVX-512 code runs.
// Any value but "" and "0" counts as set.
#pragma once

#include <string>

namespace rw {

// AVX + F16C: half <-> float row conversions.
bool CpuHasF16c();
// AVX2 + FMA: the F32 kernels (dot, attention, GDN, conv, activations).
bool CpuHasAvx2Fma();
// AVX2 + FMA + F16C: the quantised dot products and tiled matrix products.
bool CpuHasAvx2FmaF16c();
// AVX-512 F, DQ, VL, BW and VNNI (the set the 512-bit kernels use); implies CpuHasAvx2FmaF16c().
bool CpuHasAvx512();

// Why a level is off, for test skips and logs: "" when it is on, else e.g. "REWIND_NO_AVX2 is set" or "the CPU
// has no AVX-512 F/DQ/VL/BW/VNNI".
std::string CpuAvx2OffReason();
std::string CpuAvx512OffReason();

// "avx512", "avx2" or "scalar": the widest level in use.
const char* CpuLevelName();

}  // namespace rw
