// Full (non-causal) multi-head attention of the vision tower: every patch attends to every patch of the
// image. Blocked for the CPU: per head, the keys are packed transposed once ([D][n]), then each block of
// queries gets its score rows as small GEMM tiles (queries x keys, keys in vector lanes), a softmax over each
// whole row, and P·V as GEMM tiles (queries x head dims, dims in vector lanes), key chunk by key chunk so the
// keys and values of a chunk stay in cache for the whole query block. Work is split over threads by (head,
// query block).
//
// The arithmetic of one output element is fixed, whatever the ISA, the tiling or the thread count (I1):
//   s_j   = (fused multiply-add chain over d ascending, from 0, of q_d · k_jd) · scale
//   m     = max_j s_j;  e_j = ExpApprox(s_j - m) (kernels/exp_approx.h)
//   l     = 8 lanes (lane r sums e_j, j ≡ r mod 8, j < n - n mod 8, ascending), then
//           ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)), then the remaining e_j added in ascending j
//   out_d = (fused multiply-add chain over j ascending, from 0, of e_j · v_jd) · (1 / l)
// Every vector lane is one such element, so the AVX-512, AVX2 and scalar twins give identical bits (tested).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/thread_pool.h"

namespace rw::vision {

enum class AttnIsa { kScalar, kAvx2, kAvx512 };

// Whether this CPU runs the twin (kScalar always); the best one it runs.
bool AttnIsaAvailable(AttnIsa isa);
AttnIsa BestAttnIsa();
const char* AttnIsaName(AttnIsa isa);

// The packed keys and values of one call, kept by a caller that runs several (the tower's layers) so they are
// allocated once per image; freed with it.
struct VisionAttentionBuffers {
  std::vector<float> keys, values;
};

// qkv: n rows of 3·H·D floats as the fused QKV projection writes them (q of head h at h·D, k at (H + h)·D, v
// at (2H + h)·D). out: n rows of H·D floats, head h at h·D. scale multiplies the dot products. buffers:
// optional (null: allocated for this call). The isa must be available (checked).
void VisionAttention(const float* qkv, int32_t n, int32_t H, int32_t D, float scale, float* out,
                     kernels::ThreadPool* pool, VisionAttentionBuffers* buffers = nullptr,
                     AttnIsa isa = BestAttnIsa());

}  // namespace rw::vision
