// Activations: σ(x) = 1/(1+e^-x), silu(x) = x·σ(x) (llama.cpp's formulas) with e^x from ExpApprox
// (kernels/exp_approx.h, within 1 ulp of expf), softplus with threshold 20 (expf, log1p). The row functions run
// 8 lanes at a time with AVX2 and give the bits of the scalar ones (same operations: a negate, ExpApprox, an
// add, a divide, a multiply).
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/exp_approx.h"

namespace rw::kernels {

inline float Sigmoid(float x) { return 1.0f / (1.0f + ExpApprox(-x)); }
inline float Silu(float x) { return x / (1.0f + ExpApprox(-x)); }
inline float Softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

// out[i] = silu(gate[i]) * up[i]. out may alias gate.
void SwiGlu(const float* gate, const float* up, int64_t n, float* out);
// x[i] = silu(x[i]).
void SiluInPlace(float* x, int64_t n);
// o[i] = o[i] * silu(z[i]).
void MulSilu(float* o, const float* z, int64_t n);
// o[i] = o[i] * sigmoid(g[i]).
void MulSigmoid(float* o, const float* g, int64_t n);

}  // namespace rw::kernels
