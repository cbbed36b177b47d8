// Test skips for the ISA-specific kernel paths (base/cpu_features.h): a test of a SIMD path skips, and says
// why, when the CPU lacks that level or REWIND_NO_AVX2 / REWIND_NO_AVX512 turned it off, instead of comparing
// the fallback with itself.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "base/cpu_features.h"

#define REWIND_SKIP_WITHOUT_AVX2() \
  if (!::rw::CpuHasAvx2FmaF16c()) GTEST_SKIP() << "AVX2 path not tested: " << ::rw::CpuAvx2OffReason()

#define REWIND_SKIP_WITHOUT_AVX512() \
  if (!::rw::CpuHasAvx512()) GTEST_SKIP() << "AVX-512 path not tested: " << ::rw::CpuAvx512OffReason()

// A SIMD width parameter: 0 (portable), 256 (AVX2) or 512 (AVX-512).
#define REWIND_SKIP_WITHOUT_WIDTH(width) \
  if ((width) == 512) {                  \
    REWIND_SKIP_WITHOUT_AVX512();        \
  } else if ((width) == 256) {           \
    REWIND_SKIP_WITHOUT_AVX2();          \
  }

namespace rw {

// Test names for a SIMD width parameter: Portable, Avx2, Avx512.
inline std::string SimdWidthName(const ::testing::TestParamInfo<int>& info) {
  return info.param == 512 ? "Avx512" : info.param == 256 ? "Avx2" : "Portable";
}

}  // namespace rw
