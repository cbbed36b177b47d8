// The gated delta rule for one value head and one token (spec model-qwen35.md 7.4 step 5), in llama.cpp's
// fused-op order. The state is stored as llama.cpp does: M[j·S + i] = M_h[i][j] (i = key index, contiguous;
// j = value index), so every reduction is a contiguous fixed-order dot product.
#pragma once

#include <cstdint>

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

}  // namespace rw::kernels
