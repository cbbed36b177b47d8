#version 450
// out[i] = (x[i] · 1/sqrt(mean(x²) + eps)) · w[i] per row (kernels::RmsNorm): Σx² of float products in double,
// in element order, the mean and the scale in float. One invocation per row; rows of `n` floats `stride` apart;
// w_flag 0 = no weight. Rows may be sub-rows (per-head norms): row r starts at x_offset + r·stride.
layout(local_size_x = 64) in;
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Wt { float w[]; };
layout(std430, binding = 2) buffer O { float o[]; };
layout(push_constant) uniform P { uint rows; uint n; uint stride; uint x_offset; uint o_offset; uint o_stride; uint w_flag; float eps; } pc;

void main() {
  const uint r = LinearX();
  if (r >= pc.rows) return;
  const uint xb = pc.x_offset + r * pc.stride, ob = pc.o_offset + r * pc.o_stride;
  precise double sum = 0.0LF;
  for (uint i = 0u; i < pc.n; ++i) {
    precise const float p = x[xb + i] * x[xb + i];
    sum += double(p);
  }
  precise const float mean = float(sum / double(pc.n));
  precise const float scale = 1.0 / sqrt(mean + pc.eps);
  for (uint i = 0u; i < pc.n; ++i) {
    precise const float v = x[xb + i] * scale;
    o[ob + i] = pc.w_flag != 0u ? v * w[i] : v;
  }
}
