// The gated delta rule for one value head and one token (spec model-qwen35.md 7.4 step 5), in llama.cpp's
// fused-op order. The state is stored as llama.cpp does: M[j·S + i] = M_h[i][j] (i = key index, contiguous;
// j = value index), so every reduction is a contiguous fixed-order dot product.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace rw::kernels {

// M <- exp(g)·M;  δ[j] = (v[j] − Σ_i M[i][j]·k[i])·β;  M[i][j] += k[i]·δ[j];
// o[j] = (Σ_i M[i][j]·q[i]) · (1/sqrt(S)) when o is not null (replay passes null; the state is the same).
// M_in (optional): read the state from M_in instead of M and write the result to M (a copy fused into the step,
// same bits as copying first; M_in may equal M).
void GdnHeadStep(float* M, const float* q, const float* k, const float* v, float beta, float g, int32_t S,
                 float* o, const float* M_in = nullptr);
// The portable loop GdnHeadStep runs without AVX2+FMA; the AVX2 and AVX-512 code give the same bits (exposed
// for tests, with the SIMD variants: width 256 = AVX2+FMA, 512 = AVX-512; the caller checks the CPU, dot.h).
void GdnHeadStepPortable(float* M, const float* q, const float* k, const float* v, float beta, float g, int32_t S,
                         float* o, const float* M_in = nullptr);
void GdnHeadStepSimd(int width, float* M, const float* q, const float* k, const float* v, float beta, float g,
                     int32_t S, float* o, const float* M_in = nullptr);

// One token of GdnHeadSteps: its q, k, v (v indexed by state row j), beta, the decay and o (null: no output).
// The decay is exp(g) on every key channel (Gated DeltaNet), or, when `decay` is set, decay[i] on key channel i
// (Kimi Delta Attention, KDA: M[i][j] <- decay[i]·M[i][j], computed by the caller); the rest of the step is the
// same. With every decay[i] = exp(g) a KDA token gives the GDN token's bits.
struct GdnToken {
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  float beta = 0, g = 0;
  float* o = nullptr;
  const float* decay = nullptr;  // [S] per key channel (KDA); null: exp(g) on every channel
};
inline constexpr size_t kGdnTokenChunk = 64;
inline constexpr int32_t kGdnRowBlock = 16;

// GdnHeadStep for tokens in order, the first reading M_in (optional) like GdnHeadStep. The state's rows are
// independent, so each row goes through every token before the next: with AVX-512 and S = 32, 64 or 128 the
// rows stay in registers (loaded and stored once per 16 tokens, the next rows prefetched); otherwise a block of
// kGdnRowBlock rows (8 KiB at S = 128) goes through the tokens (in chunks of kGdnTokenChunk) while it stays in
// L1. Every row gets exactly GdnHeadStep's operations in token order (same bits), and KDA tokens (per-channel
// decay) take the same paths. width: as GdnHeadStepSimd, 0 = portable, -1 = best.
void GdnHeadSteps(float* M, std::span<const GdnToken> tokens, int32_t S, const float* M_in = nullptr,
                  int width = -1);
// GdnHeadSteps on the state rows [j_begin, j_end) only (value indices; o rows likewise): rows are independent, so
// threads can split one head's rows (when a layer has fewer heads than threads), each row with the same bits.
void GdnHeadStepsRows(float* M, std::span<const GdnToken> tokens, int32_t S, const float* M_in, int32_t j_begin,
                      int32_t j_end, int width = -1);

}  // namespace rw::kernels
