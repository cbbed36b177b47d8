// qwen3next's fused Gated DeltaNet projections rearranged into qwen35's layout, one token's row at a time (the
// CPU's model/gdn_layer.cc and the GPU's gdn_split.comp twin make the same copies).
#pragma once

#include <cstdint>
#include <cstring>

namespace rw::kernels {

// ssm_in row [Hk groups of (q S, k S, v r·S, z r·S)] -> qkv [q Kd | k Kd | v Vd] (Kd = Hk·S, Vd = Hk·r·S), z [Vd].
inline void SplitQkvzRow(const float* in, int32_t S, int32_t Hk, int32_t r, float* qkv, float* z) {
  const int32_t Kd = Hk * S, G = 2 * S + 2 * r * S;
  for (int32_t g = 0; g < Hk; ++g) {
    const float* grp = in + static_cast<int64_t>(g) * G;
    std::memcpy(qkv + g * S, grp, sizeof(float) * S);
    std::memcpy(qkv + Kd + g * S, grp + S, sizeof(float) * S);
    std::memcpy(qkv + 2 * Kd + g * r * S, grp + 2 * S, sizeof(float) * r * S);
    std::memcpy(z + g * r * S, grp + 2 * S + r * S, sizeof(float) * r * S);
  }
}

// ssm_ba row [Hk groups of (b r, a r)] -> b [Hv], a [Hv] (Hv = Hk·r).
inline void SplitBaRow(const float* ba, int32_t Hk, int32_t r, float* b, float* a) {
  for (int32_t g = 0; g < Hk; ++g)
    for (int32_t m = 0; m < r; ++m) {
      b[g * r + m] = ba[g * 2 * r + m];
      a[g * r + m] = ba[g * 2 * r + r + m];
    }
}

}  // namespace rw::kernels
