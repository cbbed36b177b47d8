#version 450
// The batch's new K and V rows copied to their place in the layer's KV buffer, rounded to the cache type as the
// CPU stores them (f16 = 1: fp16 round to nearest even, exact), so attention reads the bits the CPU reads.
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer K { float k[]; };   // [N][KW]
layout(std430, binding = 1) readonly buffer V { float v[]; };   // [N][KW]
layout(std430, binding = 2) buffer KC { float kc[]; };
layout(std430, binding = 3) buffer VC { float vc[]; };
layout(std430, binding = 4) readonly buffer R { int rows[]; };  // [N][2] {kv row of the first key, position}
layout(push_constant) uniform P { uint N; uint KW; uint f16; } pc;
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

void main() {
  const uint e = LinearX();
  if (e >= pc.N * pc.KW) return;
  const uint i = e / pc.KW, c = e % pc.KW;
  const uint dst = (uint(rows[2u * i]) + uint(rows[2u * i + 1u])) * pc.KW + c;
  float kx = k[e], vx = v[e];
  if (pc.f16 != 0u) {
    kx = F16ToF32(F32ToF16(kx));
    vx = F16ToF32(F32ToF16(vx));
  }
  kc[dst] = kx;
  vc[dst] = vx;
}
