#version 450
// Activation rows converted to the format a weight type dots against (gguf::QuantizeActivationRow, same bytes):
// ACT_Q8_0 (id = 127/amax, round half to even; d kept as the fp16 value), ACT_Q8_1 (the same, and the fp16 term
// s = d·Σq in `bsum` as a float's bits), ACT_Q8_K (iscale = -127/max, round
// half to even, d = 1/iscale, 16-element sums), ACT_F16 / ACT_BF16 (round to nearest even).
// One invocation per block of a row (Q8_0 / Q8_1: 32, Q8_K: 256, F16/BF16: 1 element).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
#if defined(ACT_F16) || defined(ACT_BF16)
layout(std430, binding = 1) writeonly buffer Q { uint16_t q16[]; };
#else
layout(std430, binding = 1) writeonly buffer Q { int8_t q[]; };
#endif
layout(std430, binding = 2) writeonly buffer D { float d[]; };
layout(std430, binding = 3) writeonly buffer S { int bsum[]; };
layout(std430, binding = 4) readonly buffer U { float u[]; };
// n_blocks over all rows; x_offset floats; swiglu 1: the rows are silu(x)·u (u laid out as x; SwiGLU, the same
// arithmetic as eltwise.comp's mode 1), computed here instead of stored by a dispatch of their own.
layout(push_constant) uniform P { uint n_blocks; uint x_offset; uint swiglu; } pc;
float In(uint j) { return pc.swiglu != 0u ? SwiGlu(x[j], u[j]) : x[j]; }

void main() {
  const uint b = LinearX();
  if (b >= pc.n_blocks) return;
#if defined(ACT_Q8_0) || defined(ACT_Q8_1)
  const uint base = b * 32u;
  float amax = 0.0;
  for (uint j = 0u; j < 32u; ++j) amax = max(amax, abs(In(pc.x_offset + base + j)));
  precise const float id = amax != 0.0 ? 127.0 / amax : 0.0;
  precise const float dd = amax / 127.0;
  d[b] = F16ToF32(F32ToF16(dd));
  int sum = 0;
  for (uint j = 0u; j < 32u; ++j) {
    precise const float v = In(pc.x_offset + base + j) * id;
    const int qi = int(clamp(roundEven(v), -128.0, 127.0));
    q[base + j] = int8_t(qi);
    sum += qi;
  }
#if defined(ACT_Q8_1)
  precise const float sd = dd * float(sum);  // s = f16(d·Σq) with the unrounded d, as a float's bits
  bsum[b] = floatBitsToInt(F16ToF32(F32ToF16(sd)));
#endif
#elif defined(ACT_Q8_K)
  const uint base = b * 256u;
  float mx = 0.0, amax = 0.0;
  for (uint j = 0u; j < 256u; ++j) {
    const float v = In(pc.x_offset + base + j);
    if (abs(v) > amax) { amax = abs(v); mx = v; }
  }
  if (amax == 0.0) {
    for (uint j = 0u; j < 256u; ++j) q[base + j] = int8_t(0);
    for (uint g = 0u; g < 16u; ++g) bsum[b * 16u + g] = 0;
    d[b] = 0.0;
    return;
  }
  precise const float iscale = -127.0 / mx;
  for (uint g = 0u; g < 16u; ++g) {
    int s = 0;
    for (uint l = 0u; l < 16u; ++l) {
      precise const float v = iscale * In(pc.x_offset + base + g * 16u + l);
      const int qi = int(clamp(roundEven(v), -128.0, 127.0));
      q[base + g * 16u + l] = int8_t(qi);
      s += qi;
    }
    bsum[b * 16u + g] = s;
  }
  precise const float dd = 1.0 / iscale;
  d[b] = dd;
#else
#if defined(ACT_F16)
  q16[b] = uint16_t(F32ToF16(In(pc.x_offset + b)));
#else
  q16[b] = uint16_t(F32ToBf16(In(pc.x_offset + b)));
#endif
#endif
}
