#version 450
// y[t][r] = W[r] · a[t]: one invocation per output element, the weight row's blocks in order, so an element's
// bits do not depend on the number of tokens, the row range or the workgroup layout (I1). The arithmetic is
// gguf::VecDotRef's (llama.cpp's generic C numerics), written so that the compiler can neither contract nor
// reorder it (`precise`): integer block sums, float block partials in block order (K-quants: 8 float lanes
// summed at the end), F32 / F16 / BF16 products rounded to float and summed in double.
// W_<TYPE> picks the weight type; the activation a is in gguf::VecDotType(TYPE) (quant_act.comp).
// MAT_ID (matmul_<type>_id, the MoE experts): output row t multiplies the weight rows of expert ids[t] (rows
// ids[t]·e_stride + r_off + r of the stacked expert tensor) with activation row t / a_div; the element is the
// same arithmetic as the dense product of that expert's matrix.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer W { uint8_t w[]; };
#if defined(W_F32)
layout(std430, binding = 1) readonly buffer A { float af[]; };
#elif defined(W_F16) || defined(W_BF16)
layout(std430, binding = 1) readonly buffer A { uint16_t ah[]; };
#else
layout(std430, binding = 1) readonly buffer A { int8_t aq[]; };
#endif
layout(std430, binding = 2) readonly buffer AD { float ad[]; };
layout(std430, binding = 3) readonly buffer AS { int abs_[]; };
layout(std430, binding = 4) buffer Y { float y[]; };
#if defined(MAT_ID)
layout(std430, binding = 5) readonly buffer I { int ids[]; };  // [N] expert of each output row
#endif
// rows, cols (K), tokens, weight row bytes, y row stride (floats), y offset (floats), activation offset
// (elements, for F32 activations read in place); MAT_ID: activation rows per output row's divisor, weight rows
// per expert, first weight row of the expert's matrix, and the experts [e_lo, e_hi) this dispatch's weight
// buffer holds (a stacked tensor over the device's buffer range comes in parts; rows of other experts are left
// to the dispatches of their parts).
layout(push_constant) uniform P {
  uint M; uint K; uint N; uint row_bytes; uint y_stride; uint y_offset; uint a_offset; uint a_div; uint e_stride; uint r_off;
  uint e_lo; uint e_hi;
} pc;

uint U8(uint o) { return uint(w[o]); }
int I8(uint o) { return int(int8_t(w[o])); }
float WF16(uint o) { return F16ToF32(U8(o) | (U8(o + 1u) << 8)); }

void main() {
  const uint r = gl_GlobalInvocationID.x, t = LinearY();
  if (r >= pc.M || t >= pc.N) return;
#if defined(MAT_ID)
  const uint ta = t / pc.a_div;  // activation row
  const uint e = uint(ids[t]);
  if (e < pc.e_lo || e >= pc.e_hi) return;
  const uint row = ((e - pc.e_lo) * pc.e_stride + pc.r_off + r) * pc.row_bytes;
#else
  const uint ta = t;
  const uint row = r * pc.row_bytes;
#endif
#if defined(W_F32) || defined(W_F16) || defined(W_BF16)
  precise double sum = 0.0LF;
  for (uint i = 0u; i < pc.K; ++i) {
#if defined(W_F32)
    const uint o = row + 4u * i;
    const float wv = uintBitsToFloat(U8(o) | (U8(o + 1u) << 8) | (U8(o + 2u) << 16) | (U8(o + 3u) << 24));
    precise const float p = wv * af[pc.a_offset + ta * pc.K + i];
#elif defined(W_F16)
    precise const float p = WF16(row + 2u * i) * F16ToF32(uint(ah[ta * pc.K + i]));
#else
    precise const float p = Bf16ToF32(U8(row + 2u * i) | (U8(row + 2u * i + 1u) << 8)) * Bf16ToF32(uint(ah[ta * pc.K + i]));
#endif
    sum += double(p);
  }
  y[pc.y_offset + t * pc.y_stride + r] = float(sum);
#elif defined(W_Q8_0) || defined(W_Q4_0)
  const uint nb = pc.K / 32u;
  precise float sumf = 0.0;
  for (uint i = 0u; i < nb; ++i) {
    const uint a = ta * pc.K + i * 32u;
    int sumi = 0;
#if defined(W_Q8_0)
    const uint blk = row + i * 34u;
    for (uint j = 0u; j < 32u; ++j) sumi += I8(blk + 2u + j) * int(aq[a + j]);
    precise const float dd = WF16(blk) * ad[ta * nb + i];
    precise const float p = float(sumi) * dd;
#else
    const uint blk = row + i * 18u;
    for (uint j = 0u; j < 16u; ++j) {
      const uint qb = U8(blk + 2u + j);
      sumi += (int(qb & 15u) - 8) * int(aq[a + j]);
      sumi += (int(qb >> 4) - 8) * int(aq[a + j + 16u]);
    }
    precise const float p0 = float(sumi) * WF16(blk);
    precise const float p = p0 * ad[ta * nb + i];
#endif
    sumf += p;
  }
  y[pc.y_offset + t * pc.y_stride + r] = sumf;
#else  // K-quants against Q8_K
  const uint nb = pc.K / 256u;
  precise float sums[8] = float[8](0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
  precise float sumf = 0.0;
  for (uint i = 0u; i < nb; ++i) {
    const uint a = ta * pc.K + i * 256u;
    const float yd = ad[ta * nb + i];
    int aux32[8] = int[8](0, 0, 0, 0, 0, 0, 0, 0);
#if defined(W_Q4_K) || defined(W_Q5_K)
#if defined(W_Q4_K)
    const uint blk = row + i * 144u, qs = blk + 16u;
#else
    const uint blk = row + i * 176u, qh = blk + 16u, qs = blk + 48u;
#endif
    const uint sc = blk + 4u;
    int sumi = 0;
    uint scales[8], mins[8];
    for (uint j = 0u; j < 8u; ++j) {
      if (j < 4u) {
        scales[j] = U8(sc + j) & 63u;
        mins[j] = U8(sc + j + 4u) & 63u;
      } else {
        scales[j] = (U8(sc + j + 4u) & 15u) | ((U8(sc + j - 4u) >> 6) << 4);
        mins[j] = (U8(sc + j + 4u) >> 4) | ((U8(sc + j) >> 6) << 4);
      }
    }
    for (uint j = 0u; j < 16u; ++j) sumi += abs_[(ta * nb + i) * 16u + j] * int(mins[j / 2u]);
    for (uint j = 0u; j < 8u; ++j) {  // sub-block j: 32 values
      const uint chunk = j / 2u, hi = j & 1u;
      for (uint k = 0u; k < 32u; k += 8u)
        for (uint l = 0u; l < 8u; ++l) {
          const uint e = k + l;
          int v = int(hi == 0u ? (U8(qs + chunk * 32u + e) & 15u) : (U8(qs + chunk * 32u + e) >> 4));
#if defined(W_Q5_K)
          if ((U8(qh + e) & (1u << j)) != 0u) v += 16;
#endif
          aux32[l] += int(scales[j]) * (int(aq[a + j * 32u + e]) * v);
        }
    }
    precise const float dk = WF16(blk) * yd;
    for (uint l = 0u; l < 8u; ++l) {
      precise const float p = dk * float(aux32[l]);
      sums[l] += p;
    }
    precise const float dmin = WF16(blk + 2u) * yd;
    precise const float pm = dmin * float(sumi);
    sumf -= pm;
#elif defined(W_Q6_K)
    const uint blk = row + i * 210u, ql = blk, qh = blk + 128u, sc = blk + 192u;
    for (uint g = 0u; g < 16u; ++g) {  // 16 groups of 16 values
      for (uint k = 0u; k < 16u; k += 8u)
        for (uint l = 0u; l < 8u; ++l) {
          const uint e = g * 16u + k + l;        // element 0..255
          const uint half_ = e / 128u, in_half = e % 128u, quarter = in_half / 32u, ll = in_half % 32u;
          const uint qlb = ql + half_ * 64u + (quarter & 1u) * 32u + ll;
          const uint low = (quarter < 2u) ? (U8(qlb) & 15u) : (U8(qlb) >> 4);
          const uint high = (U8(qh + half_ * 32u + ll) >> (2u * quarter)) & 3u;
          const int v = int(low | (high << 4)) - 32;
          aux32[l] += I8(sc + g) * (int(aq[a + e]) * v);
        }
    }
    precise const float dk = WF16(blk + 208u) * yd;
    for (uint l = 0u; l < 8u; ++l) {
      precise const float p = dk * float(aux32[l]);
      sums[l] += p;
    }
#endif
  }
  for (uint l = 0u; l < 8u; ++l) sumf += sums[l];
  y[pc.y_offset + t * pc.y_stride + r] = sumf;
#endif
}
