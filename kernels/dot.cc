#include "kernels/dot.h"

#include <immintrin.h>

#include <cmath>

#include "base/cpu_features.h"

namespace rw::kernels {
namespace {

// Final reduction shared by both versions: acc[4][8] -> float, then + tail.
inline float ReduceLanes(float acc[4][8]) {
  float s[8];
  for (int l = 0; l < 8; ++l) s[l] = (acc[0][l] + acc[1][l]) + (acc[2][l] + acc[3][l]);
  // Pairwise over lanes: (0+4, 1+5, 2+6, 3+7), then (0+2, 1+3), then 0+1.
  float h[4];
  for (int l = 0; l < 4; ++l) h[l] = s[l] + s[l + 4];
  const float h0 = h[0] + h[2], h1 = h[1] + h[3];
  return h0 + h1;
}

__attribute__((target("avx2,fma"))) float DotF32Avx2(const float* a, const float* b, int64_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps(), acc2 = _mm256_setzero_ps(),
         acc3 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
    acc2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), acc2);
    acc3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), acc3);
  }
  for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
  // ReduceLanes' order in registers: per lane (0 + 1) + (2 + 3), then lanes (0+4 ...), (0+2, 1+3), 0+1.
  const __m256 s = _mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3));
  __m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
  h = _mm_add_ps(h, _mm_movehl_ps(h, h));
  h = _mm_add_ss(h, _mm_movehdup_ps(h));
  float tail = 0.0f;
  for (; i < n; ++i) tail = std::fma(a[i], b[i], tail);
  return _mm_cvtss_f32(h) + tail;
}

const bool kHasAvx2Fma = CpuHasAvx2Fma();  // read once: DotF32 runs in the innermost loops

}  // namespace

float DotF32Portable(const float* a, const float* b, int64_t n) {
  float acc[4][8] = {};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int k = 0; k < 4; ++k)
      for (int l = 0; l < 8; ++l) acc[k][l] = std::fma(a[i + 8 * k + l], b[i + 8 * k + l], acc[k][l]);
  }
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) acc[0][l] = std::fma(a[i + l], b[i + l], acc[0][l]);
  float tail = 0.0f;
  for (; i < n; ++i) tail = std::fma(a[i], b[i], tail);
  return ReduceLanes(acc) + tail;
}

float DotF32(const float* a, const float* b, int64_t n) {
  return kHasAvx2Fma ? DotF32Avx2(a, b, n) : DotF32Portable(a, b, n);
}

}  // namespace rw::kernels
