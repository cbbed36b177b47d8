#include "kernels/ssm.h"

#include <cmath>

#include "base/cpu_features.h"

namespace rw::kernels {
namespace ssm_avx2 {
void HeadRows(float* s, const float* s_in, std::span<const SsmToken> tokens, int32_t p0, int32_t p1,
              int32_t N);  // kernels/ssm_avx2.cc
}  // namespace ssm_avx2

namespace {

// Rows [p0, p1) of the state through every token, in the order SsmHeadSteps documents.
void HeadRowsPortable(float* s, const float* s_in, std::span<const SsmToken> tokens, int32_t p0, int32_t p1,
                      int32_t N) {
  const int32_t nv = N - N % 8;
  for (int32_t p = p0; p < p1; ++p) {
    float* row = s + static_cast<int64_t>(p) * N;
    const float* src = s_in + static_cast<int64_t>(p) * N;
    for (size_t t = 0; t < tokens.size(); ++t) {
      const SsmToken& k = tokens[t];
      const float xdt = k.x[p] * k.dt;
      float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      for (int32_t n = 0; n < N; ++n) {
        const float a = src[n] * k.dA;
        const float b = k.B[n] * xdt;
        row[n] = a + b;
        if (n < nv) lane[n % 8] = std::fma(row[n], k.C[n], lane[n % 8]);
      }
      src = row;
      if (k.y == nullptr) continue;
      float h[4];
      for (int l = 0; l < 4; ++l) h[l] = lane[l] + lane[l + 4];
      const float h0 = h[0] + h[2], h1 = h[1] + h[3];
      float sum = h0 + h1;
      for (int32_t n = nv; n < N; ++n) sum = std::fma(row[n], k.C[n], sum);
      k.y[p] = sum;
    }
  }
}

}  // namespace

void SsmHeadSteps(float* s, std::span<const SsmToken> tokens, int32_t P, int32_t N, const float* s_in,
                  int width) {
  if (s_in == nullptr) s_in = s;
  if (tokens.empty()) {
    if (s_in != s)
      for (int64_t i = 0; i < static_cast<int64_t>(P) * N; ++i) s[i] = s_in[i];
    return;
  }
  if (width < 0) width = CpuHasAvx2Fma() ? 256 : 0;
  if (width == 256) return ssm_avx2::HeadRows(s, s_in, tokens, 0, P, N);
  HeadRowsPortable(s, s_in, tokens, 0, P, N);
}

}  // namespace rw::kernels
