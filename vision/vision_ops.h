// Row operations of the vision tower, with llama.cpp's CPU arithmetic where it fixes the bits: LayerNorm (ggml_norm:
// mean and variance accumulated in double), GELU through the f16 table (GGML_GELU_FP16), the 2-D vision RoPE of
// ggml_rope_multi in GGML_ROPE_TYPE_VISION mode, bilinear align-corners resize (ggml_interpolate).
#pragma once

#include <cstdint>
#include <vector>

namespace rw::vision {

// out = (x - mean) / sqrt(var + eps) * w + b over one row of n. out may alias x.
void LayerNormRow(const float* x, const float* w, const float* b, int64_t n, float eps, float* out);
// x[i] = gelu(x[i]) with ggml's f16 table: 0 below -10, identity above 10, else table[f16(x)].
void GeluRow(float* x, int64_t n);
// cos/sin cache for one patch at (row, col) for a head of d values: pairs [0, d/4) rotate by row·θ_k, pairs
// [d/4, d/2) by col·θ_(k-d/4), θ_k = 10000^(-4k/d) by repeated multiplication. out [d] = {cos, sin} per pair.
void VisionRopeCache(int32_t row, int32_t col, int32_t d, float* out);
// Bilinear resize with aligned corners of a [side][side][E] table to [h][w][E].
std::vector<float> ResizePositions(const std::vector<float>& table, int32_t side, int32_t E, int32_t w, int32_t h);

}  // namespace rw::vision
