#version 450
// L2 normalisation as kernels::L2Norm (rms_norm with eps/n, times 1/sqrt(n)), in place, on `rows` vectors of n:
// vector r at x[x_off + (r / per)·outer + (r % per)·inner] (the q and k heads of the GDN conv output).
layout(local_size_x = 64) in;
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(std430, binding = 0) buffer X { float x[]; };
layout(push_constant) uniform P { uint rows; uint n; uint per; uint outer; uint inner; uint x_off; float eps; } pc;

void main() {
  const uint r = LinearX();
  if (r >= pc.rows) return;
  const uint b = pc.x_off + (r / pc.per) * pc.outer + (r % pc.per) * pc.inner;
  precise double sum = 0.0LF;
  for (uint i = 0u; i < pc.n; ++i) {
    precise const float p = x[b + i] * x[b + i];
    sum += double(p);
  }
  precise const float mean = float(sum / double(pc.n));
  precise const float e = pc.eps / float(pc.n);
  precise const float scale = 1.0 / sqrt(mean + e);
  precise const float post = 1.0 / sqrt(float(pc.n));
  for (uint i = 0u; i < pc.n; ++i) {
    precise const float v = x[b + i] * scale;
    x[b + i] = v * post;
  }
}
