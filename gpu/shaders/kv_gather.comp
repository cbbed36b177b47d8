#version 450
// The cached K and V rows a forward attends to, gathered from a layer's device page pool (the host's byte layout:
// [page][row][KW] of f32, or of f16 packed two to a word) into the contiguous f32 rows attention reads:
// dst[tab[2r]] = pool[tab[2r + 1]] for each listed row r, f16 widened exactly. Exact.
layout(local_size_x = 64) in;
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(std430, binding = 0) readonly buffer KP { uint kp[]; };
layout(std430, binding = 1) readonly buffer VP { uint vp[]; };
layout(std430, binding = 2) writeonly buffer KC { float kc[]; };  // [rows][KW]
layout(std430, binding = 3) writeonly buffer VC { float vc[]; };
layout(std430, binding = 4) readonly buffer T { int tab[]; };     // [n][2] {dst row, pool row}
layout(push_constant) uniform P { uint n; uint KW; uint f16; } pc;

void main() {
  const uint e = LinearX();
  if (e >= pc.n * pc.KW) return;
  const uint i = e / pc.KW, c = e % pc.KW;
  const uint dst = uint(tab[2u * i]) * pc.KW + c, src = uint(tab[2u * i + 1u]) * pc.KW + c;
  if (pc.f16 != 0u) {
    const uint sh = (src & 1u) * 16u;
    kc[dst] = F16ToF32((kp[src >> 1] >> sh) & 0xFFFFu);
    vc[dst] = F16ToF32((vp[src >> 1] >> sh) & 0xFFFFu);
  } else {
    kc[dst] = uintBitsToFloat(kp[src]);
    vc[dst] = uintBitsToFloat(vp[src]);
  }
}
