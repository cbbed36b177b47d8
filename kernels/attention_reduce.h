// The lane sum of attention.h's dot product for eight accumulators at once, shared by the 256- and 512-bit
// tiles: lane j of the result = ((v_j[0] + v_j[1]) + (v_j[2] + v_j[3])) + ((v_j[4] + v_j[5]) + (v_j[6] + v_j[7])).
#pragma once

#include <immintrin.h>

namespace rw::kernels {

__attribute__((target("avx2,fma"))) inline __m256 AttnReduce8(__m256 v0, __m256 v1, __m256 v2, __m256 v3, __m256 v4,
                                                              __m256 v5, __m256 v6, __m256 v7) {
  const __m256 ab = _mm256_hadd_ps(_mm256_hadd_ps(v0, v1), _mm256_hadd_ps(v2, v3));
  const __m256 cd = _mm256_hadd_ps(_mm256_hadd_ps(v4, v5), _mm256_hadd_ps(v6, v7));
  return _mm256_add_ps(_mm256_permute2f128_ps(ab, cd, 0x20), _mm256_permute2f128_ps(ab, cd, 0x31));
}

}  // namespace rw::kernels
