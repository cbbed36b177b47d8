#version 450
// GDN gates per (token, value head): beta = sigmoid(b), g = softplus(a + dt_bias)·ssm_a (spec 7.4 step 4).
layout(local_size_x = 64) in;
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(std430, binding = 0) buffer B { float b[]; };        // [N][Hv] in: b, out: beta
layout(std430, binding = 1) buffer A { float a[]; };        // [N][Hv] in: a, out: g
layout(std430, binding = 2) readonly buffer D { float dt_bias[]; };
layout(std430, binding = 3) readonly buffer SA { float ssm_a[]; };
layout(push_constant) uniform P { uint n; uint Hv; } pc;

void main() {
  const uint e = LinearX();
  if (e >= pc.n) return;
  const uint h = e % pc.Hv;
  b[e] = 1.0 / (1.0 + exp(-b[e]));
  const float x = a[e] + dt_bias[h];
  const float sp = x > 20.0 ? x : log(1.0 + exp(x));
  a[e] = sp * ssm_a[h];
}
