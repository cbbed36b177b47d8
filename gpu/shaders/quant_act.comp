#version 450
// Activation rows converted to the format a weight type dots against (gguf::QuantizeActivationRow, same bytes):
// ACT_Q8_0 (id = 127/amax, round half to even; d kept as the fp16 value), ACT_Q8_1 (the same, and the fp16 term
// s = d·Σq in `bsum` as a float's bits), ACT_Q8_K (iscale = -127/max, round
// half to even, d = 1/iscale, 16-element sums), ACT_F16 / ACT_BF16 (round to nearest even).
// One invocation per block of a row (Q8_0 / Q8_1: 32, Q8_K: 256, F16/BF16: 1 element).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 4) readonly buffer U { float u[]; };
// n_blocks over all rows; x_offset floats; swiglu 1: the rows are silu(x)·u (u laid out as x; SwiGLU, the same
// arithmetic as eltwise.comp's mode 1), computed here instead of stored by a dispatch of their own.
layout(push_constant) uniform P { uint n_blocks; uint x_offset; uint swiglu; } pc;
float In(uint j) { return pc.swiglu != 0u ? SwiGlu(x[j], u[j]) : x[j]; }
#define QB_Q 1
#define QB_D 2
#define QB_S 3
#define ACT_IN(e) In(pc.x_offset + (e))
#include "quant_block.glsl"

void main() {
  const uint b = LinearX();
  if (b >= pc.n_blocks) return;
  QuantBlock(b);
}
