#version 450
// Causal softmax attention of N rows x Hq query heads, over keys in blocks of B absolute positions
// [b·B, (b+1)·B) in ascending order with an online softmax: per block, the block's maximum score, the running
// maximum m, the running sum l and the output accumulator rescaled by exp(m_old - m_new), then the block's
// exp-weighted values added in position order; after the block holding the row's own position,
// o = acc · (1 / l). The blocks are fixed by absolute position and B by the head size (the host's
// AttentionBlock), so a row's bits depend on its position and keys alone: not on the batch, not on the device.
// A dispatch runs blocks [b0, b1): the host splits a long context into several dispatches where the driver
// limits an invocation's loop iterations (lavapipe); m and l live in `ml` between dispatches, acc in o, so the
// bits are the same however the blocks are grouped. K and V are read straight from a layer's page pool (the
// host's byte layout: [page][row][Hkv·D] in the cache type, f32, f16 or bf16 packed two to a word, or 32-element
// GGUF blocks dequantised in the kernel with the CPU's exact arithmetic, kv_types.glsl): a row's key at
// position p lives at pool row pages[off + p / PS] · PS + p % PS, off = the row's entry in `rows`. No gather copy.
// GQA: query head h reads KV head h / (Hq / Hkv). No atomics.
//
// Three kernels with the same float operations in the same order, so the same bits (gpu/seq_ops.h
// AttentionKernel):
// - serial ("attention"): one invocation per (row, head) runs every key and every dimension itself;
// - ATTN_PAR ("attention_par"): a workgroup of 64 per (row, head). Per block, lane j scores key p0 + j (the
//   same Score(): serial over d) into shared memory; every lane then takes the block maximum over the scores in
//   key order and rescales its own accumulators; lane j turns its key's score into the weight exp(s - m); then
//   every lane adds the weights into l in key order (each lane the same sum) and, for the dims it owns
//   (d = j, j + 64, ..), adds w_p · V[p][d] over the block's keys in ascending order. Parallel over keys for the
//   scores and over d for the values; every sum keeps the serial kernel's order. Accumulators stay in registers
//   for the dispatch and go to o (and m, l to ml) at its end.
// - ATTN_G = 2, 4, 8 ("attention_gqaG"): ATTN_PAR's per-head operations with a workgroup per (row, KV head) for
//   the G query heads of its GQA group (below).
layout(local_size_x = 64) in;
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(std430, binding = 0) readonly buffer Qb { float q[]; };    // [N][Hq·D]
layout(std430, binding = 1) readonly buffer Kb { uint kp[]; };    // page pool [pool rows][Hkv·D] in type kt
layout(std430, binding = 1) readonly buffer Kb8 { uint8_t kp8[]; };  // the same bytes
layout(std430, binding = 2) readonly buffer Vb { uint vp[]; };    // in type vt
layout(std430, binding = 2) readonly buffer Vb8 { uint8_t vp8[]; };
layout(std430, binding = 3) buffer Ob { float o[]; };             // [N][Hq·D]
layout(std430, binding = 4) readonly buffer R { int rows[]; };    // [N][2] {offset of the page list, position}
layout(std430, binding = 5) buffer ML { float ml[]; };            // [N·Hq][2] running max and sum
layout(std430, binding = 6) readonly buffer PT { int pages[]; };  // the sequences' page lists
layout(push_constant) uniform P {
  uint N; uint Hq; uint Hkv; uint D; float scale; uint B; uint b0; uint b1; uint PS; uint kt; uint vt;
} pc;

#include "kv_types.glsl"
KV_DEFINE_ELEMENT(kp, kp8)
KV_DEFINE_ELEMENT(vp, vp8)
float Kx(uint e) { return KvElement_kp(pc.kt, e); }
float Vx(uint e) { return KvElement_vp(pc.vt, e); }

float Score(uint qb, uint kb) {
  precise float sc = 0.0;
  for (uint d = 0u; d < pc.D; ++d) {
    precise const float t = q[qb + d] * Kx(kb + d);
    sc += t;
  }
  precise const float s = sc * pc.scale;
  return s;
}

uint PoolRow(uint off, uint p) { return uint(pages[off + p / pc.PS]) * pc.PS + p % pc.PS; }

#ifdef ATTN_PAR
// Double-buffered by block parity: a lane may still read block b's weights and rows while others score b + 1.
shared float s_sc[2][64];
shared float s_w[2][64];
shared uint s_kb[2][64];

void main() {
  const uint gid = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;  // (row, head); x may fold into y
  if (gid >= pc.N * pc.Hq) return;  // uniform over the workgroup, as every early return below
  const uint lid = gl_LocalInvocationID.x;
  const uint i = gid / pc.Hq, h = gid % pc.Hq, kvh = h / (pc.Hq / pc.Hkv);
  const uint off = uint(rows[2u * i]), pos = uint(rows[2u * i + 1u]);
  const uint qb = i * pc.Hq * pc.D + h * pc.D, KW = pc.Hkv * pc.D;
  const uint last = pos / pc.B;
  if (pc.b0 > last) return;
  float m = -1.0 / 0.0;
  precise float l = 0.0;
  float acc[4];  // dims lid + 64·k (D <= 256)
  for (uint k = 0u; k < 4u; ++k) {
    const uint d = lid + 64u * k;
    acc[k] = (pc.b0 == 0u || d >= pc.D) ? 0.0 : o[qb + d];
  }
  if (pc.b0 != 0u) {
    m = ml[2u * gid];
    l = ml[2u * gid + 1u];
  }
  const uint b_end = min(pc.b1, last + 1u);
  for (uint b = pc.b0; b < b_end; ++b) {
    const uint sb = b & 1u;
    const uint p0 = b * pc.B, n = min(p0 + pc.B, pos + 1u) - p0;  // B <= 64: at most one key a lane
    if (lid < n) {
      const uint kb = PoolRow(off, p0 + lid) * KW + kvh * pc.D;
      s_kb[sb][lid] = kb;
      s_sc[sb][lid] = Score(qb, kb);
    }
    barrier();
    float bm = -1.0 / 0.0;
    for (uint j = 0u; j < n; ++j) bm = max(bm, s_sc[sb][j]);
    const float mn = max(m, bm);
    if (mn != m) {
      precise const float dm = m - mn;
      const float c = exp(dm);
      precise const float lc = l * c;
      l = lc;
      for (uint k = 0u; k < 4u; ++k) {
        precise const float a = acc[k] * c;
        acc[k] = a;
      }
      m = mn;
    }
    if (lid < n) {
      precise const float ds = s_sc[sb][lid] - m;
      s_w[sb][lid] = exp(ds);
    }
    barrier();
    for (uint j = 0u; j < n; ++j) {
      const float w = s_w[sb][j];
      l += w;
      const uint kb = s_kb[sb][j];
      for (uint k = 0u; k < 4u; ++k) {
        const uint d = lid + 64u * k;
        if (d < pc.D) {
          precise const float t = w * Vx(kb + d);
          acc[k] = acc[k] + t;
        }
      }
    }
  }
  if (b_end == last + 1u) {
    const float inv = 1.0 / l;
    for (uint k = 0u; k < 4u; ++k) {
      const uint d = lid + 64u * k;
      if (d < pc.D) o[qb + d] = acc[k] * inv;
    }
  } else {
    for (uint k = 0u; k < 4u; ++k) {
      const uint d = lid + 64u * k;
      if (d < pc.D) o[qb + d] = acc[k];
    }
    if (lid == 0u) {
      ml[2u * gid] = m;
      ml[2u * gid + 1u] = l;
    }
  }
}
#elif defined(ATTN_G)
// A workgroup of 64 per (row, KV head) running the G = ATTN_G query heads of its GQA group: lane j scores key
// p0 + j for each head, holds dims j, j + 64, .. of every head's accumulator, and reads each V element once for
// the G heads. Each head's operations are attention_par's, in its order.
#extension GL_EXT_control_flow_attributes : require
#define G ATTN_G
shared float s_sc[2][G * 64];
shared float s_w[2][G * 64];
shared uint s_kb[2][64];

void main() {
  const uint gid = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;  // (row, KV head)
  if (gid >= pc.N * pc.Hkv) return;  // uniform over the workgroup, as every early return below
  const uint lid = gl_LocalInvocationID.x;
  const uint i = gid / pc.Hkv, kvh = gid % pc.Hkv;  // the host checked Hq == G · Hkv
  const uint off = uint(rows[2u * i]), pos = uint(rows[2u * i + 1u]);
  const uint h0 = i * pc.Hq + kvh * G, KW = pc.Hkv * pc.D;  // (row, head) index of the group's first head
  const uint last = pos / pc.B;
  if (pc.b0 > last) return;
  float m[G];
  float l[G];
  float acc[G * 4];  // head g, dims lid + 64·k at g·4 + k (D <= 256)
  [[unroll]] for (uint g = 0u; g < G; ++g) {
    m[g] = pc.b0 == 0u ? -1.0 / 0.0 : ml[2u * (h0 + g)];
    l[g] = pc.b0 == 0u ? 0.0 : ml[2u * (h0 + g) + 1u];
    [[unroll]] for (uint k = 0u; k < 4u; ++k) {
      const uint d = lid + 64u * k;
      acc[g * 4u + k] = (pc.b0 == 0u || d >= pc.D) ? 0.0 : o[(h0 + g) * pc.D + d];
    }
  }
  const uint b_end = min(pc.b1, last + 1u);
  for (uint b = pc.b0; b < b_end; ++b) {
    const uint sb = b & 1u;
    const uint p0 = b * pc.B, n = min(p0 + pc.B, pos + 1u) - p0;
    if (lid < n) {
      const uint kb = PoolRow(off, p0 + lid) * KW + kvh * pc.D;
      s_kb[sb][lid] = kb;
      [[unroll]] for (uint g = 0u; g < G; ++g) s_sc[sb][g * 64u + lid] = Score((h0 + g) * pc.D, kb);
    }
    barrier();
    [[unroll]] for (uint g = 0u; g < G; ++g) {
      float bm = -1.0 / 0.0;
      for (uint j = 0u; j < n; ++j) bm = max(bm, s_sc[sb][g * 64u + j]);
      const float mn = max(m[g], bm);
      if (mn != m[g]) {
        precise const float dm = m[g] - mn;
        const float c = exp(dm);
        precise const float lc = l[g] * c;
        l[g] = lc;
        [[unroll]] for (uint k = 0u; k < 4u; ++k) {
          precise const float a = acc[g * 4u + k] * c;
          acc[g * 4u + k] = a;
        }
        m[g] = mn;
      }
      if (lid < n) {
        precise const float ds = s_sc[sb][g * 64u + lid] - m[g];
        s_w[sb][g * 64u + lid] = exp(ds);
      }
    }
    barrier();
    [[unroll]] for (uint g = 0u; g < G; ++g) {
      for (uint j = 0u; j < n; ++j) {
        precise const float lw = l[g] + s_w[sb][g * 64u + j];
        l[g] = lw;
      }
    }
    for (uint j = 0u; j < n; ++j) {
      const uint kb = s_kb[sb][j];
      [[unroll]] for (uint k = 0u; k < 4u; ++k) {
        const uint d = lid + 64u * k;
        if (d < pc.D) {
          const float v = Vx(kb + d);
          [[unroll]] for (uint g = 0u; g < G; ++g) {
            precise const float t = s_w[sb][g * 64u + j] * v;
            acc[g * 4u + k] = acc[g * 4u + k] + t;
          }
        }
      }
    }
  }
  const bool done = b_end == last + 1u;
  [[unroll]] for (uint g = 0u; g < G; ++g) {
    const float inv = 1.0 / l[g];
    [[unroll]] for (uint k = 0u; k < 4u; ++k) {
      const uint d = lid + 64u * k;
      if (d < pc.D) o[(h0 + g) * pc.D + d] = done ? acc[g * 4u + k] * inv : acc[g * 4u + k];
    }
    if (!done && lid == 0u) {
      ml[2u * (h0 + g)] = m[g];
      ml[2u * (h0 + g) + 1u] = l[g];
    }
  }
}
#else
void main() {
  const uint gid = LinearX();
  if (gid >= pc.N * pc.Hq) return;
  const uint i = gid / pc.Hq, h = gid % pc.Hq, kvh = h / (pc.Hq / pc.Hkv);
  const uint off = uint(rows[2u * i]), pos = uint(rows[2u * i + 1u]);
  const uint qb = i * pc.Hq * pc.D + h * pc.D, KW = pc.Hkv * pc.D;
  const uint last = pos / pc.B;  // the block holding the row's own position
  if (pc.b0 > last) return;
  float m = -1.0 / 0.0;
  precise float l = 0.0;
  if (pc.b0 == 0u) {
    for (uint d = 0u; d < pc.D; ++d) o[qb + d] = 0.0;
  } else {
    m = ml[2u * gid];
    l = ml[2u * gid + 1u];
  }
  const uint b_end = min(pc.b1, last + 1u);
  for (uint b = pc.b0; b < b_end; ++b) {
    const uint p0 = b * pc.B, p1 = min(p0 + pc.B, pos + 1u);
    float bm = -1.0 / 0.0;
    for (uint p = p0; p < p1; ++p) bm = max(bm, Score(qb, PoolRow(off, p) * KW + kvh * pc.D));
    const float mn = max(m, bm);
    if (mn != m) {  // rescale what came before (exp(m - mn); the first block: acc and l are 0)
      precise const float dm = m - mn;
      const float c = exp(dm);
      precise const float lc = l * c;
      l = lc;
      for (uint d = 0u; d < pc.D; ++d) {
        precise const float a = o[qb + d] * c;
        o[qb + d] = a;
      }
      m = mn;
    }
    for (uint p = p0; p < p1; ++p) {
      const uint kb = PoolRow(off, p) * KW + kvh * pc.D;
      precise const float ds = Score(qb, kb) - m;
      const float w = exp(ds);
      l += w;
      for (uint d = 0u; d < pc.D; ++d) {
        precise const float t = w * Vx(kb + d);
        o[qb + d] = o[qb + d] + t;
      }
    }
  }
  if (b_end == last + 1u) {
    const float inv = 1.0 / l;
    for (uint d = 0u; d < pc.D; ++d) o[qb + d] = o[qb + d] * inv;
  } else {
    ml[2u * gid] = m;
    ml[2u * gid + 1u] = l;
  }
}
#endif
