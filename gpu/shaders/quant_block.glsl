// The conversion of activation block b (gguf::QuantizeActivationRow's bytes) into q / d / bsum, shared by
// quant_act.comp and the RMSNorm that converts its output rows itself (rms_norm.comp, RMS_QUANT). Before the
// include: ACT_Q8_0 | ACT_Q8_1 | ACT_Q8_K | ACT_F16 | ACT_BF16, the bindings QB_Q, QB_D, QB_S and
// ACT_IN(e), the float value of element e of the rows being converted (block b holds elements b·QK ...).
#if defined(ACT_F16) || defined(ACT_BF16)
layout(std430, binding = QB_Q) writeonly buffer Q { uint16_t q16[]; };
#else
layout(std430, binding = QB_Q) writeonly buffer Q { int8_t q[]; };
#endif
layout(std430, binding = QB_D) writeonly buffer D { float d[]; };
layout(std430, binding = QB_S) writeonly buffer S { int bsum[]; };

void QuantBlock(uint b) {
#if defined(ACT_Q8_0) || defined(ACT_Q8_1)
  const uint base = b * 32u;
  float amax = 0.0;
  for (uint j = 0u; j < 32u; ++j) amax = max(amax, abs(ACT_IN(base + j)));
  precise const float id = amax != 0.0 ? 127.0 / amax : 0.0;
  precise const float dd = amax / 127.0;
  d[b] = F16ToF32(F32ToF16(dd));
  int sum = 0;
  for (uint j = 0u; j < 32u; ++j) {
    precise const float v = ACT_IN(base + j) * id;
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
    const float v = ACT_IN(base + j);
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
      precise const float v = iscale * ACT_IN(base + g * 16u + l);
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
  q16[b] = uint16_t(F32ToF16(ACT_IN(b)));
#else
  q16[b] = uint16_t(F32ToBf16(ACT_IN(b)));
#endif
#endif
}
