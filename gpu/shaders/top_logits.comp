#version 450
// One pass of the top-K selection of logits rows (kernels::TopLogits): each workgroup sorts a block of 1,024
// entries of one row in shared memory (a bitonic network, descending logit, ties to the lower id, NaN as -inf)
// and writes the block's best K pairs (logit bits, id). The first pass reads the float rows, later passes the
// pairs of the previous one, until one block per row is left. Integer operations only: floats are compared
// through an order-preserving integer key (-0.0 and +0.0 share one), so denormals and signed zeros order as
// on the CPU and the selected values keep their bits. Each invocation runs at most ~600 loop iterations.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer In { uint src[]; };  // pass 0: [rows][n_in] float bits; else pairs
layout(std430, binding = 1) writeonly buffer Out { uint dst[]; };  // [rows][n_blocks][K] pairs (bits, id)
layout(push_constant) uniform P { uint rows; uint n_in; uint n_blocks; uint K; uint pairs; } pc;

const uint B = 1024u;
shared uint sk[B];  // key
shared uint sv[B];  // value bits
shared int si[B];   // token id

uint Key(uint bits) {
  if (bits == 0x80000000u) bits = 0u;  // -0.0 == +0.0
  return (bits & 0x80000000u) != 0u ? ~bits : bits | 0x80000000u;
}

bool Better(uint i, uint j) { return sk[i] > sk[j] || (sk[i] == sk[j] && si[i] < si[j]); }

void main() {
  const uint g = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  if (g >= pc.rows * pc.n_blocks) return;  // uniform over the workgroup
  const uint row = g / pc.n_blocks, blk = g % pc.n_blocks, lid = gl_LocalInvocationID.x;
  for (uint t = 0u; t < B / 64u; ++t) {
    const uint e = lid + 64u * t, idx = blk * B + e;
    uint v = 0xFF800000u;  // padding: -inf with the largest id, after every real entry (key 0 < -inf's)
    int id = 0x7FFFFFFF;
    uint k = 0u;
    if (idx < pc.n_in) {
      if (pc.pairs == 0u) {
        v = src[row * pc.n_in + idx];
        id = int(idx);
      } else {
        v = src[2u * (row * pc.n_in + idx)];
        id = int(src[2u * (row * pc.n_in + idx) + 1u]);
      }
      if ((v & 0x7FFFFFFFu) > 0x7F800000u) v = 0xFF800000u;  // NaN -> -inf
      k = Key(v);
    }
    sk[e] = k;
    sv[e] = v;
    si[e] = id;
  }
  barrier();
  for (uint size = 2u; size <= B; size <<= 1) {
    for (uint stride = size >> 1; stride > 0u; stride >>= 1) {
      for (uint t = 0u; t < B / 128u; ++t) {
        const uint i = lid + 64u * t;
        const uint a = 2u * stride * (i / stride) + (i % stride), b = a + stride;
        const bool desc = (a & size) == 0u;  // this half-block goes best first
        if (desc != Better(a, b)) {
          const uint k = sk[a], v = sv[a];
          const int d = si[a];
          sk[a] = sk[b]; sv[a] = sv[b]; si[a] = si[b];
          sk[b] = k; sv[b] = v; si[b] = d;
        }
      }
      barrier();
    }
  }
  for (uint t = 0u; t < (pc.K + 63u) / 64u; ++t) {
    const uint e = lid + 64u * t;
    if (e < pc.K) {
      const uint o = 2u * (g * pc.K + e);
      dst[o] = sv[e];
      dst[o + 1u] = uint(si[e]);
    }
  }
}
