// The 8-lane ExpApprox (kernels/exp_approx.h): the same float operations, so the same bits per lane. Only for
// functions compiled for AVX2 (target attribute or -mavx2), called after a CPU check.
#pragma once

#include <immintrin.h>

#include "kernels/exp_approx.h"

namespace rw::kernels {

__attribute__((target("avx2"))) inline __m256 ExpApprox8(__m256 x) {
  using namespace exp_approx;
  const __m256 keep = _mm256_cmp_ps(x, _mm256_set1_ps(kMin), _CMP_GE_OQ);  // false for NaN and -inf
  x = _mm256_min_ps(x, _mm256_set1_ps(kMax));
  const __m256 n =
      _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_sub_ps(x, _mm256_mul_ps(n, _mm256_set1_ps(kLn2Hi)));
  r = _mm256_sub_ps(r, _mm256_mul_ps(n, _mm256_set1_ps(kLn2Lo)));
  const __m256 r2 = _mm256_mul_ps(r, r);
  __m256 p = _mm256_set1_ps(kP0);
  p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(kP1));
  p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(kP2));
  p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(kP3));
  p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(kP4));
  p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(kP5));
  p = _mm256_add_ps(_mm256_mul_ps(p, r2), r);
  p = _mm256_add_ps(p, _mm256_set1_ps(1.0f));
  const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_and_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(bits)), keep);
}

}  // namespace rw::kernels
