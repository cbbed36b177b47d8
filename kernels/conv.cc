#include "kernels/conv.h"

#include <immintrin.h>

#include "base/cpu_features.h"

namespace rw::kernels {
namespace {

// 8 channels at a time for Kc == 4 (every Qwen3.5 / Qwen3-Next model): the window of 8 channels lives in three
// registers, tokens are read and written as contiguous 8-channel rows. Per (channel, token) the float
// operations are those of the portable loop: sum = 0; sum += s0·w0; sum += s1·w1; sum += s2·w2; sum += x·w3,
// each product rounded, then added (no FMA), so the bits are the same.
__attribute__((target("avx2"))) void Conv4x8(float* state, const float* w, const float* x, int64_t x_stride,
                                             int64_t T, int64_t c, float* y, int64_t y_stride) {
  alignas(32) float ws[4][8], ss[3][8];
  for (int j = 0; j < 8; ++j) {
    for (int i = 0; i < 4; ++i) ws[i][j] = w[(c + j) * 4 + i];
    for (int i = 0; i < 3; ++i) ss[i][j] = state[(c + j) * 3 + i];
  }
  const __m256 w0 = _mm256_load_ps(ws[0]), w1 = _mm256_load_ps(ws[1]), w2 = _mm256_load_ps(ws[2]),
               w3 = _mm256_load_ps(ws[3]);
  __m256 s0 = _mm256_load_ps(ss[0]), s1 = _mm256_load_ps(ss[1]), s2 = _mm256_load_ps(ss[2]);
  for (int64_t t = 0; t < T; ++t) {
    const __m256 xt = _mm256_loadu_ps(x + t * x_stride + c);
    __m256 sum = _mm256_add_ps(_mm256_setzero_ps(), _mm256_mul_ps(s0, w0));
    sum = _mm256_add_ps(sum, _mm256_mul_ps(s1, w1));
    sum = _mm256_add_ps(sum, _mm256_mul_ps(s2, w2));
    sum = _mm256_add_ps(sum, _mm256_mul_ps(xt, w3));
    s0 = s1;
    s1 = s2;
    s2 = xt;
    if (y != nullptr) _mm256_storeu_ps(y + t * y_stride + c, sum);
  }
  _mm256_store_ps(ss[0], s0);
  _mm256_store_ps(ss[1], s1);
  _mm256_store_ps(ss[2], s2);
  for (int j = 0; j < 8; ++j)
    for (int i = 0; i < 3; ++i) state[(c + j) * 3 + i] = ss[i][j];
}

}  // namespace

void CausalConvRunPortable(float* state, const float* w, const float* x, int64_t x_stride, int64_t T, int64_t c0,
                           int64_t c1, int32_t Kc, float* y, int64_t y_stride) {
  const int32_t Ks = Kc - 1;
  for (int64_t c = c0; c < c1; ++c) {
    float* s = state + c * Ks;
    const float* wc = w + c * Kc;
    for (int64_t t = 0; t < T; ++t) {
      const float xt = x[t * x_stride + c];
      float sum = 0.0f;
      for (int32_t i = 0; i < Ks; ++i) sum += s[i] * wc[i];
      sum += xt * wc[Ks];
      for (int32_t i = 0; i + 1 < Ks; ++i) s[i] = s[i + 1];
      if (Ks > 0) s[Ks - 1] = xt;
      if (y != nullptr) y[t * y_stride + c] = sum;
    }
  }
}

void CausalConvRun(float* state, const float* w, const float* x, int64_t x_stride, int64_t T, int64_t c0,
                   int64_t c1, int32_t Kc, float* y, int64_t y_stride) {
  int64_t c = c0;
  if (Kc == 4 && CpuHasAvx2Fma()) {
    for (; c + 8 <= c1; c += 8) Conv4x8(state, w, x, x_stride, T, c, y, y_stride);
  }
  CausalConvRunPortable(state, w, x, x_stride, T, c, c1, Kc, y, y_stride);
}

}  // namespace rw::kernels
