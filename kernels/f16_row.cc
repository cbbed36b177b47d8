#include "kernels/f16_row.h"

#include <immintrin.h>

#include "base/cpu_features.h"
#include "kernels/f16.h"

namespace rw::kernels {
namespace {

__attribute__((target("avx,f16c"))) void HalfToFloatF16c(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  for (; i < n; ++i) dst[i] = _cvtsh_ss(src[i]);
}

__attribute__((target("avx,f16c"))) void FloatToHalfF16c(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  for (; i < n; ++i) dst[i] = FloatToHalf(src[i]);
}

const bool kHasF16c = CpuHasF16c();

}  // namespace

void HalfToFloatRow(const uint16_t* src, float* dst, int64_t n) {
  if (kHasF16c) return HalfToFloatF16c(src, dst, n);
  for (int64_t i = 0; i < n; ++i) dst[i] = HalfToFloat(src[i]);
}

void FloatToHalfRow(const float* src, uint16_t* dst, int64_t n) {
  if (kHasF16c) return FloatToHalfF16c(src, dst, n);
  for (int64_t i = 0; i < n; ++i) dst[i] = FloatToHalf(src[i]);
}

}  // namespace rw::kernels
