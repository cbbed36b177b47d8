#version 450
// Strided 2-D copy: dst[dst_off + r·dst_stride + c] = src[src_off + r·src_stride + c] for r < rows, c < width
// (packing replay-log rows [C | b | a], unpacking them, gathering output rows). Exact.
layout(local_size_x = 64) in;
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(std430, binding = 0) readonly buffer S { float src[]; };
layout(std430, binding = 1) writeonly buffer D { float dst[]; };
layout(push_constant) uniform P { uint rows; uint width; uint src_off; uint src_stride; uint dst_off; uint dst_stride; } pc;

void main() {
  const uint e = LinearX();
  if (e >= pc.rows * pc.width) return;
  const uint r = e / pc.width, c = e % pc.width;
  dst[pc.dst_off + r * pc.dst_stride + c] = src[pc.src_off + r * pc.src_stride + c];
}
