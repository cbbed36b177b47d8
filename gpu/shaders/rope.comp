#version 450
// NEOX rotary embedding of head vectors (kernels::RopeApply) with the cos/sin of each token's position taken
// from a table the host computed with kernels::RopeCache (so the angles are the CPU's bits, IMRoPE sections
// included). Head r: token r / heads at x[x_off + (r / heads)·row_stride + (r % heads)·head_stride].
layout(local_size_x = 64) in;
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer C { float cache[]; };  // [tokens][n_rot]
layout(push_constant) uniform P { uint n_heads_total; uint heads; uint row_stride; uint head_stride; uint x_off; uint n_rot; } pc;

void main() {
  const uint r = LinearX();
  if (r >= pc.n_heads_total) return;
  const uint tok = r / pc.heads;
  const uint base = pc.x_off + tok * pc.row_stride + (r % pc.heads) * pc.head_stride, cb = tok * pc.n_rot;
  const uint half_ = pc.n_rot / 2u;
  for (uint i = 0u; i < half_; ++i) {
    const float c = cache[cb + 2u * i], s = cache[cb + 2u * i + 1u];
    const float x0 = x[base + i], x1 = x[base + i + half_];
    precise const float a0 = x0 * c, a1 = x1 * s, b0 = x0 * s, b1 = x1 * c;
    x[base + i] = a0 - a1;
    x[base + i + half_] = b0 + b1;
  }
}
