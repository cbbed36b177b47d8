#version 450
// qwen3next's fused GDN projections split into the layout of qwen35's (model/gdn_layer.cc does the same copies):
// mode 0, ssm_in rows [N][2Kd + 2Vd] = Hk groups of (q S, k S, v r·S, z r·S) -> qkv [N][q Kd | k Kd | v Vd] and
// z [N][Vd]; mode 1, ssm_ba rows [N][2Hv] = Hk groups of (b r, a r) -> b [N][Hv] and a [N][Hv]. One invocation per
// input element; exact copies.
layout(local_size_x = 64) in;
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(std430, binding = 0) readonly buffer I { float x[]; };
layout(std430, binding = 1) writeonly buffer O0 { float y0[]; };
layout(std430, binding = 2) writeonly buffer O1 { float y1[]; };
layout(push_constant) uniform P { uint N; uint S; uint Hk; uint r; uint mode; } pc;

void main() {
  const uint e = LinearX();
  const uint S = pc.S, Hk = pc.Hk, r = pc.r;
  if (pc.mode == 0u) {
    const uint G = 2u * S + 2u * r * S, W = Hk * G, Kd = Hk * S, Vd = Hk * r * S, C = 2u * Kd + Vd;
    if (e >= pc.N * W) return;
    const uint i = e / W, c = e % W, g = c / G, o = c % G;
    const float v = x[e];
    if (o < S) y0[i * C + g * S + o] = v;
    else if (o < 2u * S) y0[i * C + Kd + g * S + (o - S)] = v;
    else if (o < 2u * S + r * S) y0[i * C + 2u * Kd + g * r * S + (o - 2u * S)] = v;
    else y1[i * Vd + g * r * S + (o - 2u * S - r * S)] = v;
  } else {
    const uint Hv = Hk * r, W = 2u * Hv;
    if (e >= pc.N * W) return;
    const uint i = e / W, c = e % W, g = c / (2u * r), o = c % (2u * r);
    if (o < r) y0[i * Hv + g * r + o] = x[e];
    else y1[i * Hv + g * r + (o - r)] = x[e];
  }
}
