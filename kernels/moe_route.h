// The softmax router of the Qwen / Granite MoE FFN (spec model-qwen35.md 7.6), one token's row: softmax over all
// experts (max subtracted, std::exp, the sum in double, one float reciprocal), the top k by descending
// probability with ties to the lower expert index (a stable sort), and their weights renormalised by their
// float sum taken in k order (floored at 2^-14 as llama.cpp does). The CPU's FFN and the GPU's moe_route.comp
// twin (gpu_tests) follow these steps.
#pragma once

#include <cstdint>

namespace rw::kernels {

// logits [X] are replaced by the probabilities; sel [K] and wt [K] receive the chosen experts and weights.
void SoftmaxTopK(float* logits, int32_t X, int32_t K, int32_t* sel, float* wt);

}  // namespace rw::kernels
