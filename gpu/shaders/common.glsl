// Shared helpers of the compute shaders: exact fp16 / bf16 conversions done with integer operations (the GLSL
// built-ins leave rounding and denormals to the implementation), bytewise little-endian reads of GGUF blocks.
// Every shader runs with workgroups of 64 invocations in x.
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require

// fp16 bits -> float, exact (subnormals, inf, NaN kept as in gguf::Fp16ToFp32).
float F16ToF32(uint h) {
  const uint sign = (h & 0x8000u) << 16;
  const uint e = (h >> 10) & 0x1Fu;
  uint m = h & 0x3FFu;
  if (e == 0u) {
    if (m == 0u) return uintBitsToFloat(sign);
    // subnormal: m * 2^-24, exact (and a normal float)
    const float v = float(m) * 5.9604644775390625e-8;
    return uintBitsToFloat(floatBitsToUint(v) | sign);
  }
  if (e == 31u) return uintBitsToFloat(sign | 0x7F800000u | (m << 13) | (m != 0u ? 0x400000u : 0u));
  return uintBitsToFloat(sign | ((e + 112u) << 23) | (m << 13));
}

// float -> fp16 bits, round to nearest even (gguf::Fp32ToFp16).
uint F32ToF16(float f) {
  uint x = floatBitsToUint(f);
  const uint sign = (x >> 16) & 0x8000u;
  x &= 0x7FFFFFFFu;
  if (x > 0x7F800000u) return sign | 0x7E00u | ((x & 0x7FFFFFu) >> 13);
  if (x >= 0x477FF000u) return sign | 0x7C00u;
  const uint e = x >> 23;
  if (e < 113u) {
    const uint m = (x & 0x7FFFFFu) | (e != 0u ? 0x800000u : 0u);
    const uint shift = 126u - e + (e != 0u ? 0u : 1u);
    if (shift > 24u) return sign;
    uint r = m >> shift;
    const uint rem = m & ((1u << shift) - 1u);
    const uint half_ = 1u << (shift - 1u);
    if (rem > half_ || (rem == half_ && (r & 1u) != 0u)) ++r;
    return sign | r;
  }
  uint h = ((e - 112u) << 10) | ((x & 0x7FFFFFu) >> 13);
  const uint rem = x & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u) != 0u)) ++h;
  return sign | h;
}

float Bf16ToF32(uint h) { return uintBitsToFloat(h << 16); }

// float -> bf16 bits, round to nearest even; NaN -> quiet (gguf::Fp32ToBf16).
uint F32ToBf16(float f) {
  const uint u = floatBitsToUint(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (u >> 16) | 0x40u;
  return (u + (0x7FFFu + ((u >> 16) & 1u))) >> 16;
}

// The invocation's linear index along x (1-D shaders) or y (matmul's token rows) when the host folded a dispatch
// longer than the device's workgroup-count limit into the next dimension (Context::Dispatch): an element's
// index, and so its arithmetic, is the same folded or not.
// (Workgroups are 64 x 1 x 1.)
uint LinearX() {
  return gl_GlobalInvocationID.x + (gl_WorkGroupID.y + gl_WorkGroupID.z * gl_NumWorkGroups.y) * gl_NumWorkGroups.x * 64u;
}
// The workgroup's linear index for shaders with a workgroup per item (x folded into y, and y into z).
uint LinearGroup() {
  return gl_WorkGroupID.x + (gl_WorkGroupID.y + gl_WorkGroupID.z * gl_NumWorkGroups.y) * gl_NumWorkGroups.x;
}
uint LinearY() { return gl_GlobalInvocationID.y + gl_WorkGroupID.z * gl_NumWorkGroups.y; }

// kernels::ExpApprox (kernels/exp_approx.h), the same float operations in the same order: its bits.
float ExpApprox(float x) {
  if (!(x >= -87.0)) return 0.0;
  if (x > 88.0) x = 88.0;
  precise const float nx = x * 1.44269504088896341;
  const float n = roundEven(nx);
  precise const float h = n * 0.693359375;
  precise float r = x - h;
  precise const float lo = n * -2.12194440e-4;
  r = r - lo;
  precise const float r2 = r * r;
  precise float p = 1.9875691500e-4;
  p = p * r + 1.3981999507e-3;
  p = p * r + 8.3334519073e-3;
  p = p * r + 4.1665795894e-2;
  p = p * r + 1.6666665459e-1;
  p = p * r + 5.0000001201e-1;
  p = p * r2 + r;
  p = p + 1.0;
  const float scale = intBitsToFloat((int(n) + 127) << 23);
  precise const float y = p * scale;
  return y;
}

// SiLU and the logistic function, one definition for every shader that applies them (eltwise.comp, the gated
// RMSNorm, SwiGLU in quant_act.comp): the same expression compiles to the same arithmetic in each.
float Silu(float x) { return x / (1.0 + exp(-x)); }
float Sigmoid(float x) { return 1.0 / (1.0 + exp(-x)); }
// silu(g)·u (SwiGLU) and a·silu(z) (the gated norm's gate), each product rounded once.
float SwiGlu(float g, float u) {
  precise const float r = Silu(g) * u;
  return r;
}
float MulSilu(float a, float z) {
  precise const float r = a * Silu(z);
  return r;
}
