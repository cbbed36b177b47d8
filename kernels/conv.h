// Causal depthwise convolution of the GDN layers, token by token (spec model-qwen35.md 7.4 step 3).
#pragma once

#include <cstdint>

namespace rw::kernels {

// Channels [c0, c1) of T consecutive tokens of one sequence, strictly in token order:
//   X[c] = [state[c][0..Kc-2], x[t][c]],  y[t][c] = Σ_{i<Kc} X[c][i]·w[c][i] (float, i ascending),
//   state[c] <- X[c][1..Kc-1].
// state: [C][Kc-1] (channel-major, oldest first), w: [C][Kc], x: [T][x_stride], y: [T][y_stride].
// Each (channel, token) is computed the same way whatever T or the channel range, so splitting tokens into
// several calls or channels over threads gives the same bits.
// With AVX2 and Kc == 4 runs 8 channels per vector (same bits as the portable loop).
void CausalConvRun(float* state, const float* w, const float* x, int64_t x_stride, int64_t T, int64_t c0,
                   int64_t c1, int32_t Kc, float* y, int64_t y_stride);
// The scalar loop (the twin; also used for channel tails and other kernel sizes).
void CausalConvRunPortable(float* state, const float* w, const float* x, int64_t x_stride, int64_t T, int64_t c0,
                           int64_t c1, int32_t Kc, float* y, int64_t y_stride);

}  // namespace rw::kernels
