#include "kernels/gdn.h"

#include <algorithm>
#include <cmath>

#include "base/cpu_features.h"
#include "kernels/dot.h"

namespace rw::kernels {
namespace gdn_avx2 {
// decay_vec (KDA): one decay per key channel instead of `decay`.
void HeadStep(float* M, const float* q, const float* k, const float* v, float beta, float decay, float scale,
              int32_t S, float* o, const float* M_in, int32_t rows,
              const float* decay_vec = nullptr);  // kernels/gdn_avx2.cc
}  // namespace gdn_avx2
namespace gdn_avx512 {
void HeadStep(float* M, const float* q, const float* k, const float* v, float beta, float decay, float scale,
              int32_t S, float* o, const float* M_in, int32_t rows,
              const float* decay_vec = nullptr);  // kernels/gdn_avx512.cc, S % 32 == 0
// Every row through every token with the rows in registers (S = 32, 64, 128; false: other S, nothing done).
// The tokens all have a decay vector or none; decay[t]: the scalar decay of token t (when it has none).
bool HeadSteps(float* M, const float* M_in, int32_t S, std::span<const GdnToken> tokens, const float* decay,
               float scale);
}  // namespace gdn_avx512

namespace {

// Rows [0, rows) of the step (state rows j are independent: row j reads only row j, k, q and v[j]); the decay
// is dec[i] on key channel i when dec is set (KDA), else `decay` on every channel.
void StepRows(int width, float* M, const float* q, const float* k, const float* v, float beta, float decay,
              const float* dec, float scale, int32_t S, float* o, const float* M_in, int32_t rows) {
  if (width == 512 && S % 32 == 0)
    return gdn_avx512::HeadStep(M, q, k, v, beta, decay, scale, S, o, M_in, rows, dec);
  if (width >= 256) return gdn_avx2::HeadStep(M, q, k, v, beta, decay, scale, S, o, M_in, rows, dec);
  for (int32_t j = 0; j < rows; ++j) {
    float* row = M + static_cast<int64_t>(j) * S;
    const float* src = M_in + static_cast<int64_t>(j) * S;
    if (dec != nullptr) {
      for (int32_t i = 0; i < S; ++i) row[i] = src[i] * dec[i];
    } else {
      for (int32_t i = 0; i < S; ++i) row[i] = src[i] * decay;
    }
    const float kv = DotF32(row, k, S);
    const float delta = (v[j] - kv) * beta;
    for (int32_t i = 0; i < S; ++i) row[i] += k[i] * delta;
    if (o != nullptr) o[j] = DotF32(row, q, S) * scale;
  }
}

int BestWidth() { return CpuHasAvx2Fma() ? (CpuHasAvx512() ? 512 : 256) : 0; }

}  // namespace

void GdnHeadStepSimd(int width, float* M, const float* q, const float* k, const float* v, float beta, float g,
                     int32_t S, float* o, const float* M_in) {
  const float decay = std::exp(g);
  const float scale = 1.0f / std::sqrt(static_cast<float>(S));
  StepRows(width == 512 ? 512 : 256, M, q, k, v, beta, decay, nullptr, scale, S, o, M_in != nullptr ? M_in : M, S);
}

void GdnHeadStep(float* M, const float* q, const float* k, const float* v, float beta, float g, int32_t S,
                 float* o, const float* M_in) {
  // Same bits on every path: AVX-512 halves the AVX2 instructions, AVX2 makes two passes per row instead of four.
  const float decay = std::exp(g);
  const float scale = 1.0f / std::sqrt(static_cast<float>(S));
  StepRows(BestWidth(), M, q, k, v, beta, decay, nullptr, scale, S, o, M_in != nullptr ? M_in : M, S);
}

void GdnHeadStepPortable(float* M, const float* q, const float* k, const float* v, float beta, float g, int32_t S,
                         float* o, const float* M_in) {
  const float decay = std::exp(g);
  const float scale = 1.0f / std::sqrt(static_cast<float>(S));
  StepRows(0, M, q, k, v, beta, decay, nullptr, scale, S, o, M_in != nullptr ? M_in : M, S);
}

void GdnHeadStepsRows(float* M, std::span<const GdnToken> tokens, int32_t S, const float* M_in, int32_t j_begin,
                      int32_t j_end, int width) {
  if (tokens.empty() || j_begin >= j_end) return;
  if (width < 0) width = BestWidth();
  if (M_in == nullptr) M_in = M;
  const bool all_rows = j_begin == 0 && j_end == S;
  const float scale = 1.0f / std::sqrt(static_cast<float>(S));
  float decay[kGdnTokenChunk];
  for (size_t t0 = 0, t1; t0 < tokens.size(); t0 = t1) {
    // A chunk: up to kGdnTokenChunk tokens that all have a decay vector (KDA) or all have none (GDN).
    const bool vec = tokens[t0].decay != nullptr;
    t1 = t0;
    do {
      decay[t1 - t0] = vec ? 1.0f : std::exp(tokens[t1].g);
      ++t1;
    } while (t1 < tokens.size() && t1 - t0 < kGdnTokenChunk && (tokens[t1].decay != nullptr) == vec);
    if (all_rows && width == 512 &&
        gdn_avx512::HeadSteps(M, t0 == 0 ? M_in : M, S, tokens.subspan(t0, t1 - t0), decay, scale))
      continue;
    // One token: all rows at once. Several: a block of rows through every token while it stays in L1.
    const int32_t block = t1 - t0 == 1 ? S : kGdnRowBlock;
    for (int32_t j0 = j_begin; j0 < j_end; j0 += block) {
      const int32_t rows = std::min(block, j_end - j0);
      float* Mj = M + static_cast<int64_t>(j0) * S;
      for (size_t t = t0; t < t1; ++t) {
        const GdnToken& x = tokens[t];
        const float* src = t == 0 ? M_in + static_cast<int64_t>(j0) * S : Mj;
        StepRows(width, Mj, x.q, x.k, x.v + j0, x.beta, decay[t - t0], x.decay, scale, S, x.o ? x.o + j0 : nullptr,
                 src, rows);
      }
    }
  }
}

void GdnHeadSteps(float* M, std::span<const GdnToken> tokens, int32_t S, const float* M_in, int width) {
  GdnHeadStepsRows(M, tokens, S, M_in, 0, S, width);
}

}  // namespace rw::kernels
