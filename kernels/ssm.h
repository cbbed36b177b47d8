// The Mamba-2 selective-state update (SSD recurrence, scalar decay per head) for one head, token by token, in
// llama.cpp's ggml_ssm_scan order. The state of a head is [P][N] (llama.cpp layout: s[p·N + n], n = state
// index contiguous), so the output reduction is a contiguous dot product.
#pragma once

#include <cstdint>
#include <span>

namespace rw::kernels {

// One token of a head: x [P], B and C [N] (the head's group), dt = softplus(dt_raw + dt_bias), dA =
// exp(dt·A), y [P] (null: no output; the state is the same).
struct SsmToken {
  const float* x = nullptr;
  const float* B = nullptr;
  const float* C = nullptr;
  float dt = 0, dA = 0;
  float* y = nullptr;
};

// For every token in order:  s[p][n] <- s[p][n]·dA + B[n]·(x[p]·dt)   (two multiplies then an add, no FMA)
//                            y[p]     = Σ_n s[p][n]·C[n]
// The sum has one fixed order: 8 lanes (lane l takes n ≡ l mod 8 for n < N - N%8, accumulated with FMA in n
// order), the lanes summed as (l + l+4), then (0+2, 1+3), then 0+1, then the tail n >= N - N%8 by FMA. Rows p
// are independent: each row goes through every token before the next (it stays in registers), which gives the
// bits of a token-by-token run; so do any split of the tokens into calls and any thread count over heads.
// s_in (optional): the state before the first token is read from s_in (a copy fused into the first step; may
// equal s). width: 256 = AVX2+FMA (the caller checks the CPU, dot.h), 0 = the portable twin, -1 = best. All
// widths give the same bits.
void SsmHeadSteps(float* s, std::span<const SsmToken> tokens, int32_t P, int32_t N,
                  const float* s_in = nullptr, int width = -1);

}  // namespace rw::kernels
