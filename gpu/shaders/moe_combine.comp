#version 450
// The MoE output per (token, channel), in a fixed order (the CPU's model/experts.cc and ffn.cc): the K expert
// rows times their weights summed in k order, then the shared expert: added (shared 1) or times
// sigmoid(gate) (shared 2, kernels::Sigmoid's ExpApprox: the CPU's bits). No atomics: one invocation writes one
// element.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Y { float ye[]; };   // [N][K][E] expert outputs
layout(std430, binding = 1) readonly buffer Wt { float wt[]; };  // [N][K]
layout(std430, binding = 2) readonly buffer SH { float sh[]; };  // [N][E] shared expert output
layout(std430, binding = 3) readonly buffer SG { float sg[]; };  // [N] shared expert gate logit
layout(std430, binding = 4) writeonly buffer O { float o[]; };   // [N][E]
layout(push_constant) uniform P { uint N; uint K; uint E; uint shared_; } pc;

void main() {
  const uint g = LinearX();
  if (g >= pc.N * pc.E) return;
  const uint i = g / pc.E, d = g % pc.E;
  precise float acc = ye[i * pc.K * pc.E + d] * wt[i * pc.K];
  for (uint k = 1u; k < pc.K; ++k) {
    precise const float p = ye[(i * pc.K + k) * pc.E + d] * wt[i * pc.K + k];
    acc = acc + p;
  }
  if (pc.shared_ == 1u) {
    acc = acc + sh[g];
  } else if (pc.shared_ == 2u) {
    precise const float den = 1.0 + ExpApprox(-sg[i]);
    precise const float gs = 1.0 / den;
    precise const float p = sh[g] * gs;
    acc = acc + p;
  }
  o[g] = acc;
}
