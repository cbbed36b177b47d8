#version 450
// Element-wise ops over `rows` rows of `width` values; a[a_off + r·a_stride + c] op= b[b_off + r·b_stride + c]:
// mode 0: a += b (residual add); 1: a = silu(a)·b (SwiGLU, kernels::SwiGlu); 2: a = a·silu(b) (kernels::MulSilu);
// 3: a = a·sigmoid(b) (kernels::MulSigmoid); 4: a = f16(a) (F16 KV rounding, exact). The CPU computes exp with
// its own approximation (kernels/exp_approx.h): modes 1-3 agree within rounding, not bitwise.
layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
layout(push_constant) uniform P { uint rows; uint width; uint a_off; uint a_stride; uint b_off; uint b_stride; uint mode; } pc;
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

void main() {
  const uint e = LinearX();
  if (e >= pc.rows * pc.width) return;
  const uint r = e / pc.width, c = e % pc.width;
  const uint ai = pc.a_off + r * pc.a_stride + c, bi = pc.b_off + r * pc.b_stride + c;
  if (pc.mode == 0u) a[ai] = a[ai] + b[bi];
  else if (pc.mode == 1u) a[ai] = SwiGlu(a[ai], b[bi]);
  else if (pc.mode == 2u) a[ai] = MulSilu(a[ai], b[bi]);
  else if (pc.mode == 3u) a[ai] = a[ai] * Sigmoid(b[bi]);
  else a[ai] = F16ToF32(F32ToF16(a[ai]));
}
