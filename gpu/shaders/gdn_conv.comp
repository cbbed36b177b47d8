#version 450
// The GDN short causal convolution, token by token per (sequence, channel) (kernels::CausalConvRun), then SiLU:
// u[row][c] = silu(Σ state·w + x·w_last); the window `state` [seq][C][Kc-1] moves by one token each step.
// seqs: per sequence {row0, n, slot} (slot: index of its state in the layer's state buffer). A dispatch runs
// tokens [t0, t1) of each sequence (split as gdn_delta.comp is; the window is in memory between tokens).
layout(local_size_x = 64) in;
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(std430, binding = 0) readonly buffer X { float x[]; };      // [N][x_stride] raw qkv projection
layout(std430, binding = 1) readonly buffer W { float w[]; };      // [C][Kc]
layout(std430, binding = 2) buffer S { float st[]; };               // [slots][C][Kc-1]
layout(std430, binding = 3) writeonly buffer U { float u[]; };     // [N][C]
layout(std430, binding = 4) readonly buffer Q { int seqs[]; };     // [n_seqs][4]
layout(push_constant) uniform P { uint n_seqs; uint C; uint Kc; uint x_stride; uint t0; uint t1; } pc;

void main() {
  const uint g = LinearX();
  if (g >= pc.n_seqs * pc.C) return;
  const uint s = g / pc.C, c = g % pc.C;
  const uint row0 = uint(seqs[4u * s]), n = uint(seqs[4u * s + 1u]), slot = uint(seqs[4u * s + 2u]);
  const uint Ks = pc.Kc - 1u;
  const uint sb = (slot * pc.C + c) * Ks, wb = c * pc.Kc;
  for (uint t = pc.t0; t < min(n, pc.t1); ++t) {
    const float xt = x[(row0 + t) * pc.x_stride + c];
    precise float sum = 0.0;
    for (uint i = 0u; i < Ks; ++i) {
      precise const float p = st[sb + i] * w[wb + i];
      sum += p;
    }
    precise const float pl = xt * w[wb + Ks];
    sum += pl;
    for (uint i = 0u; i + 1u < Ks; ++i) st[sb + i] = st[sb + i + 1u];
    if (Ks > 0u) st[sb + Ks - 1u] = xt;
    u[(row0 + t) * pc.C + c] = sum / (1.0 + exp(-sum));
  }
}
