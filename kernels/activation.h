// Scalar activations with llama.cpp's formulas (float, expf): σ(x) = 1/(1+e^-x), silu(x) = x·σ(x),
// softplus with threshold 20.
#pragma once

#include <cmath>
#include <cstdint>

namespace rw::kernels {

inline float Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
inline float Silu(float x) { return x / (1.0f + std::exp(-x)); }
inline float Softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

// out[i] = silu(gate[i]) * up[i]. out may alias gate.
inline void SwiGlu(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = Silu(gate[i]) * up[i];
}
inline void SiluInPlace(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = Silu(x[i]);
}

}  // namespace rw::kernels
