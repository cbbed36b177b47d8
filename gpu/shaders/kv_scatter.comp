#version 450
// A forward's new K and V rows stored into a layer's device page pool in the cache type, the bytes the CPU's
// kernels::QuantizeKvRow writes (f32 as is; f16 rounded to nearest even, two to a word: KW even):
// pool[tab[2r + 1]] = row tab[2r] of k / v. One invocation per pool word.
layout(local_size_x = 64) in;
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(std430, binding = 0) readonly buffer K { float k[]; };  // [N][KW]
layout(std430, binding = 1) readonly buffer V { float v[]; };
layout(std430, binding = 2) buffer KP { uint kp[]; };
layout(std430, binding = 3) buffer VP { uint vp[]; };
layout(std430, binding = 4) readonly buffer T { int tab[]; };  // [n][2] {batch row, pool row}
layout(push_constant) uniform P { uint n; uint KW; uint f16; } pc;

void main() {
  const uint W = pc.f16 != 0u ? pc.KW / 2u : pc.KW;  // pool words per row
  const uint e = LinearX();
  if (e >= pc.n * W) return;
  const uint i = e / W, w = e % W;
  const uint src = uint(tab[2u * i]) * pc.KW, row = uint(tab[2u * i + 1u]);
  if (pc.f16 != 0u) {
    const uint c = 2u * w, dst = (row * pc.KW + c) >> 1;
    kp[dst] = F32ToF16(k[src + c]) | (F32ToF16(k[src + c + 1u]) << 16);
    vp[dst] = F32ToF16(v[src + c]) | (F32ToF16(v[src + c + 1u]) << 16);
  } else {
    kp[row * pc.KW + w] = floatBitsToUint(k[src + w]);
    vp[row * pc.KW + w] = floatBitsToUint(v[src + w]);
  }
}
