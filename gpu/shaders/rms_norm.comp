#version 450
// out[i] = (x[i] · 1/sqrt(mean(x²) + eps)) · w[i] per row (kernels::RmsNorm): Σx² of float products in double,
// the mean and the scale in float. Rows of `n` floats `stride` apart; w_flag 0 = no weight. Rows may be sub-rows
// (per-head norms): row r starts at x_offset + r·stride. add_flag 1: first x[i] = x[i] + y[i] (y laid out as x;
// the residual add, eltwise.comp's mode 0: the same float add), stored, then the norm of the sums. gate_flag 1:
// each output is then multiplied by silu(z[i]) (z laid out as o; the gated norm of a GDN layer, eltwise.comp's
// mode 2: the same arithmetic on the same float).
// - (default) one invocation per row, Σx² in element order: the CPU's order, so the CPU's bits.
// - RMS_WIDE (rms_norm_wide, rows of kRmsWideMinN values and more: the hidden size): a workgroup per row. Lane l
//   sums the products of elements l, l + 64, l + 128, ... in double in that order; then the 64 partials are
//   added in a fixed tree (l += l + 32, then l + 16, ... l + 1). A single invocation walking 4,096 values
//   through one chain of double adds took most of a GPU decode step's norms; this order is fixed by n alone, so
//   a row's bits still do not depend on the batch (I1), and differ from the serial order's only where a double
//   sum rounds differently into the float mean (within rounding of the CPU).
layout(local_size_x = 64) in;
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Wt { float w[]; };
layout(std430, binding = 2) buffer O { float o[]; };
layout(std430, binding = 3) readonly buffer Y { float y[]; };
layout(std430, binding = 4) readonly buffer Z { float z[]; };
layout(push_constant) uniform P { uint rows; uint n; uint stride; uint x_offset; uint o_offset; uint o_stride; uint w_flag; float eps; uint add_flag; uint gate_flag; } pc;

// x[xi] times the row's scale.
float Scaled(uint xi, float scale) {
  precise const float v = x[xi] * scale;
  return v;
}
// The normed value v of output element oi (times the weight, then the gate when asked).
float Out(float v, uint i, uint oi) {
  precise const float nv = pc.w_flag != 0u ? v * w[i] : v;
  return pc.gate_flag != 0u ? MulSilu(nv, z[oi]) : nv;
}

#if defined(RMS_QUANT)
// RMS_QUANT (rms_norm[_wide]_<act>, with ACT_Q8_0 | ACT_Q8_1 | ACT_Q8_K | ACT_F16 | ACT_BF16): the output rows are
// also converted for the matmul that reads them next (quant_block.glsl, quant_act.comp's bytes), from the floats
// just stored (so the same values, also when o is x), so that matmul needs no conversion dispatch. The rows are
// contiguous (o_offset 0, o_stride = n, a multiple of the block: a token's row, or its heads side by side), and
// element e of the conversion is element e % n of row e / n.
uint g_ob, g_row0;
#define QB_Q 5
#define QB_D 6
#define QB_S 7
#define ACT_IN(e) o[g_ob + ((e) - g_row0)]
#include "quant_block.glsl"
#if defined(ACT_Q8_0) || defined(ACT_Q8_1)
#define QBLK 32u
#elif defined(ACT_Q8_K)
#define QBLK 256u
#else
#define QBLK 1u
#endif
#endif

// x[j], after the residual add when add_flag is set (each element is read and written by one invocation).
float Value(uint j) {
  if (pc.add_flag == 0u) return x[j];
  precise const float s = x[j] + y[j];
  x[j] = s;
  return s;
}

#if defined(RMS_WIDE)
shared double partial[64];

void main() {
  const uint r = LinearGroup(), l = gl_LocalInvocationID.x;
  if (r >= pc.rows) return;  // uniform over the workgroup
  const uint xb = pc.x_offset + r * pc.stride, ob = pc.o_offset + r * pc.o_stride;
  precise double sum = 0.0LF;
  for (uint i = l; i < pc.n; i += 64u) {
    const float v = Value(xb + i);
    precise const float p = v * v;
    sum += double(p);
  }
  partial[l] = sum;
  barrier();
  [[unroll]] for (uint s = 32u; s > 0u; s >>= 1u) {
    if (l < s) {
      precise const double t = partial[l] + partial[l + s];
      partial[l] = t;
    }
    barrier();
  }
  precise const float mean = float(partial[0] / double(pc.n));
  precise const float scale = 1.0 / sqrt(mean + pc.eps);
  for (uint i = l; i < pc.n; i += 64u) {
    o[ob + i] = Out(Scaled(xb + i, scale), i, ob + i);
  }
#if defined(RMS_QUANT)
  memoryBarrierBuffer();  // the outputs other invocations of the row stored
  barrier();
  g_ob = ob;
  g_row0 = r * pc.n;
  const uint nb = pc.n / QBLK;
  for (uint j = l; j < nb; j += 64u) QuantBlock(r * nb + j);
#endif
}
#else
void main() {
  const uint r = LinearX();
  if (r >= pc.rows) return;
  const uint xb = pc.x_offset + r * pc.stride, ob = pc.o_offset + r * pc.o_stride;
  precise double sum = 0.0LF;
  for (uint i = 0u; i < pc.n; ++i) {
    const float v = Value(xb + i);
    precise const float p = v * v;
    sum += double(p);
  }
  precise const float mean = float(sum / double(pc.n));
  precise const float scale = 1.0 / sqrt(mean + pc.eps);
  for (uint i = 0u; i < pc.n; ++i) {
    o[ob + i] = Out(Scaled(xb + i, scale), i, ob + i);
  }
#if defined(RMS_QUANT)
  g_ob = ob;
  g_row0 = r * pc.n;
  const uint nb = pc.n / QBLK;
  for (uint j = 0u; j < nb; ++j) QuantBlock(r * nb + j);
#endif
}
#endif
