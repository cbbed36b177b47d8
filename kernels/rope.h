// Rotary position embedding, NEOX pairing (x[i], x[i + n_rot/2]) on the first n_rot dims of a head, optionally
// with IMROPE sections (qwen35: each pair takes its position from the t/h/w/e component; for text t=h=w=pos,
// e=0). Angles follow llama.cpp: theta_i = p · base^(-2i/n_rot) by repeated multiplication in float, linear or
// YaRN scaling (spec model-qwen35.md 7.3).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace rw::kernels {

struct RopeParams {
  int32_t n_rot = 0;                        // rotated dims per head (even)
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;                  // 1/scaling factor
  bool imrope = false;                      // qwen35 / qwen35moe
  std::array<int32_t, 4> sections{0, 0, 0, 0};
  bool yarn = false;
  float yarn_attn_factor = 1.0f;            // rope.scaling.attn_factor
  int32_t n_ctx_orig = 0;                   // YaRN original context
};

// cos/sin for one position: out [n_rot] = {cos_0, sin_0, cos_1, sin_1, ...} (pair i at 2i).
void RopeCache(const RopeParams& p, int32_t pos, float* out);
// The same with the four IMROPE components given apart (t, h, w, e): image tokens of the Qwen-VL models take
// (t, row, col, 0) (model/image_positions.h). RopeCache(p, pos) is RopeCacheMulti(p, {pos, pos, pos, 0}).
void RopeCacheMulti(const RopeParams& p, const std::array<int32_t, 4>& pos, float* out);
// Rotates one head vector x [head_dim] in place with a cache from RopeCache.
void RopeApply(const float* cache, int32_t n_rot, float* x);
// The same rotation with adjacent pairs (x[2i], x[2i+1]) (llama.cpp ROPE_TYPE_NORM: Llama, Granite).
void RopeApplyAdjacent(const float* cache, int32_t n_rot, float* x);

}  // namespace rw::kernels
