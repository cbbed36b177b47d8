#version 450
// Causal softmax attention of N rows x Hq query heads, in two levels fixed by absolute position:
// - keys in blocks of B positions [b·B, (b+1)·B), run in ascending order with an online softmax: per block, the
//   block's maximum score, the running maximum m, the running sum l and the accumulator rescaled by
//   exp(m_old - m_new), then the block's exp-weighted values added in position order;
// - blocks in spans of SB blocks [s·SB·B, (s+1)·SB·B): each span starts from m = -inf, l = 0, acc = 0, and its
//   (m, l, acc) is folded into the row's running (M, L, ACC) in ascending span order (Fold below: the first span
//   taken as it is, then M' = max(M, m), L' = L·exp(M - M') + l·exp(m - M'), ACC' likewise);
// after the row's last span, o = ACC · (1 / L). B and SB depend on the head size alone (the host's
// AttentionBlock, AttentionSpanBlocks), so a row's bits depend on its position and keys alone: not on the batch,
// not on the kernel, not on how the work is split.
//
// The spans are what lets a decode row's keys run on many workgroups at once (split = 1): a workgroup per
// (row, head, span) writes its span's (m, l, acc) to a slot of the scratch buffer, and the combine kernel
// (ATTN_COMBINE) folds the slots in span order: the same operations as the unsplit kernels, which fold in
// registers as they go. A dispatch runs blocks [b0, b1) (unsplit) or blocks b0 .. b1 of every span (split): the
// host splits a long context into several dispatches where the driver limits an invocation's loop iterations
// (lavapipe); the states live in the scratch buffer between dispatches, so the bits are the same however the
// blocks are grouped. K and V are read straight from a layer's page pool (the host's byte layout:
// [page][row][Hkv·D] in the cache type, f32, f16 or bf16 packed two to a word, or 32-element GGUF blocks
// dequantised in the kernel with the CPU's exact arithmetic, kv_types.glsl): a row's key at position p lives at
// pool row pages[off + p / PS] · PS + p % PS, off = the row's entry in `rows`. No gather copy.
// GQA: query head h reads KV head h / (Hq / Hkv). No atomics.
//
// Scratch (binding 5, floats), rh = row · Hq + head: [N·Hq][4] {span m, span l, M, L} between dispatches; then
// [N·Hq][D] the running ACC between dispatches; then (split) [N·Hq][NS][2 + D] the span slots {m, l, acc}.
//
// Three kernels with the same float operations in the same order, so the same bits (gpu/seq_ops.h
// AttentionKernel):
// - serial ("attention"): one invocation per (row, head[, span]) runs every key and every dimension itself; its
//   span accumulator lives in o (in the slot when split), ACC in the scratch;
// - ATTN_PAR ("attention_par"): a workgroup of 64 per (row, head[, span]). Per block, lane j scores key p0 + j
//   (the same Score(): serial over d) into shared memory; every lane then takes the block maximum over the scores
//   in key order and rescales its own accumulators; lane j turns its key's score into the weight exp(s - m); then
//   every lane adds the weights into l in key order (each lane the same sum) and, for the dims it owns
//   (d = j, j + 64, ..), adds w_p · V[p][d] over the block's keys in ascending order. Parallel over keys for the
//   scores and over d for the values; every sum keeps the serial kernel's order. Accumulators stay in registers
//   for the dispatch;
// - ATTN_G = 2, 4, 8 ("attention_gqaG"): ATTN_PAR's per-head operations with a workgroup per
//   (row, KV head[, span]) for the G query heads of its GQA group (below).
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
layout(std430, binding = 5) buffer ML { float ml[]; };            // the scratch (above)
layout(std430, binding = 6) readonly buffer PT { int pages[]; };  // the sequences' page lists
layout(push_constant) uniform P {
  uint N; uint Hq; uint Hkv; uint D; float scale; uint B; uint b0; uint b1; uint PS; uint kt; uint vt;
  uint SB; uint split; uint NS;  // blocks per span; 1: a workgroup per span; span slots per (row, head)
} pc;

const float kNegInf = -1.0 / 0.0;

uint RunBase() { return 4u * pc.N * pc.Hq; }
uint SlotBase(uint rh, uint s) { return RunBase() + pc.N * pc.Hq * pc.D + (rh * pc.NS + s) * (pc.D + 2u); }

// Folds a span's (m, l) into the running (M, L); c1 and c2 are the factors of the running and the span's
// accumulators (FoldAcc). The first span (M = -inf) is taken as it is: c1 = 0 on ACC = 0, c2 = 1.
void FoldScalars(inout float M, inout float L, float m, float l, out float c1, out float c2) {
  if (M == kNegInf) {
    c1 = 0.0;
    c2 = 1.0;
    M = m;
    L = l;
    return;
  }
  const float mn = max(M, m);
  precise const float d1 = M - mn;
  precise const float d2 = m - mn;
  c1 = exp(d1);
  c2 = exp(d2);
  precise const float a = L * c1;
  precise const float b = l * c2;
  precise const float s = a + b;
  L = s;
  M = mn;
}
float FoldAcc(float A, float a, float c1, float c2) {
  precise const float x = A * c1;
  precise const float y = a * c2;
  precise const float s = x + y;
  return s;
}

#ifdef ATTN_COMBINE
// A workgroup of 64 per (row, head): folds the row's span slots 0 .. its last span in order (lane j the dims
// j, j + 64, ..; every lane the same M, L) and writes o = ACC · (1 / L).
void main() {
  const uint rh = LinearGroup();
  if (rh >= pc.N * pc.Hq) return;
  const uint lid = gl_LocalInvocationID.x;
  const uint pos = uint(rows[2u * (rh / pc.Hq) + 1u]);
  const uint last_span = pos / pc.B / pc.SB;
  float M = kNegInf, L = 0.0;
  float acc[4] = float[4](0.0, 0.0, 0.0, 0.0);
  for (uint s = 0u; s <= last_span; ++s) {
    const uint sl = SlotBase(rh, s);
    float c1, c2;
    FoldScalars(M, L, ml[sl], ml[sl + 1u], c1, c2);
    for (uint k = 0u; k < 4u; ++k) {
      const uint d = lid + 64u * k;
      if (d < pc.D) acc[k] = FoldAcc(acc[k], ml[sl + 2u + d], c1, c2);
    }
  }
  const float inv = 1.0 / L;
  for (uint k = 0u; k < 4u; ++k) {
    const uint d = lid + 64u * k;
    if (d < pc.D) o[rh * pc.D + d] = acc[k] * inv;
  }
}
#else
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

// The blocks [bs, be) that span s (split) or the whole row (s = 0, unsplit) runs in this dispatch, up to the
// row's last block; false when there are none. `fresh`: they start a span (split) or the row (unsplit).
bool Range(uint s, uint last, out uint bs, out uint be, out bool fresh) {
  if (pc.split != 0u) {
    bs = s * pc.SB + pc.b0;
    be = min(s * pc.SB + min(pc.b1, pc.SB), last + 1u);
  } else {
    bs = pc.b0;
    be = min(pc.b1, last + 1u);
  }
  fresh = pc.b0 == 0u;
  return bs < be;
}

// Unsplit: after block b, the span ends (its last block, or the row's).
bool SpanEnds(uint b, uint last) { return pc.split == 0u && ((b + 1u) % pc.SB == 0u || b == last); }

// The (row, head[, span]) a workgroup or invocation runs, from its linear index g over N · H · NS (H = Hq, or Hkv
// for the group kernel: then rh is row · Hkv + KV head).
void Unit(uint g, out uint rh, out uint s) {
  const uint ns = pc.split != 0u ? pc.NS : 1u;
  rh = g / ns;
  s = g % ns;
}

#ifdef ATTN_PAR
// Double-buffered by block parity: a lane may still read block b's weights and rows while others score b + 1.
shared float s_sc[2][64];
shared float s_w[2][64];
shared uint s_kb[2][64];

void main() {
  const uint g = LinearGroup();
  if (g >= pc.N * pc.Hq * (pc.split != 0u ? pc.NS : 1u)) return;  // uniform over the workgroup, as below
  uint rh, s;
  Unit(g, rh, s);
  const uint lid = gl_LocalInvocationID.x;
  const uint i = rh / pc.Hq, h = rh % pc.Hq, kvh = h / (pc.Hq / pc.Hkv);
  const uint off = uint(rows[2u * i]), pos = uint(rows[2u * i + 1u]);
  const uint qb = rh * pc.D, KW = pc.Hkv * pc.D;
  const uint last = pos / pc.B;
  uint bs, be;
  bool fresh;
  if (!Range(s, last, bs, be, fresh)) return;
  const bool split = pc.split != 0u;
  const uint sl = split ? SlotBase(rh, s) : 0u, rb = RunBase() + rh * pc.D;
  float m = kNegInf, M = kNegInf, L = 0.0;
  precise float l = 0.0;
  float acc[4], ACC[4];  // dims lid + 64·k (D <= 256): the span's, the row's
  for (uint k = 0u; k < 4u; ++k) {
    const uint d = lid + 64u * k;
    const bool have = !fresh && d < pc.D;
    acc[k] = !have ? 0.0 : split ? ml[sl + 2u + d] : o[qb + d];
    ACC[k] = !have || split ? 0.0 : ml[rb + d];
  }
  if (!fresh) {
    m = split ? ml[sl] : ml[4u * rh];
    l = split ? ml[sl + 1u] : ml[4u * rh + 1u];
    if (!split) {
      M = ml[4u * rh + 2u];
      L = ml[4u * rh + 3u];
    }
  }
  for (uint b = bs; b < be; ++b) {
    const uint sb = b & 1u;
    const uint p0 = b * pc.B, n = min(p0 + pc.B, pos + 1u) - p0;  // B <= 64: at most one key a lane
    if (lid < n) {
      const uint kb = PoolRow(off, p0 + lid) * KW + kvh * pc.D;
      s_kb[sb][lid] = kb;
      s_sc[sb][lid] = Score(qb, kb);
    }
    barrier();
    float bm = kNegInf;
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
    if (SpanEnds(b, last)) {
      float c1, c2;
      FoldScalars(M, L, m, l, c1, c2);
      for (uint k = 0u; k < 4u; ++k) {
        ACC[k] = FoldAcc(ACC[k], acc[k], c1, c2);
        acc[k] = 0.0;
      }
      m = kNegInf;
      l = 0.0;
    }
  }
  if (split) {  // the span's state to its slot
    for (uint k = 0u; k < 4u; ++k) {
      const uint d = lid + 64u * k;
      if (d < pc.D) ml[sl + 2u + d] = acc[k];
    }
    if (lid == 0u) {
      ml[sl] = m;
      ml[sl + 1u] = l;
    }
  } else if (be == last + 1u) {
    const float inv = 1.0 / L;
    for (uint k = 0u; k < 4u; ++k) {
      const uint d = lid + 64u * k;
      if (d < pc.D) o[qb + d] = ACC[k] * inv;
    }
  } else {
    for (uint k = 0u; k < 4u; ++k) {
      const uint d = lid + 64u * k;
      if (d < pc.D) {
        o[qb + d] = acc[k];
        ml[rb + d] = ACC[k];
      }
    }
    if (lid == 0u) {
      ml[4u * rh] = m;
      ml[4u * rh + 1u] = l;
      ml[4u * rh + 2u] = M;
      ml[4u * rh + 3u] = L;
    }
  }
}
#elif defined(ATTN_G)
// A workgroup of 64 per (row, KV head[, span]) running the G = ATTN_G query heads of its GQA group: lane j scores
// key p0 + j for each head, holds dims j, j + 64, .. of every head's accumulators, and reads each V element once
// for the G heads. Each head's operations are attention_par's, in its order.
#extension GL_EXT_control_flow_attributes : require
#define G ATTN_G
shared float s_sc[2][G * 64];
shared float s_w[2][G * 64];
shared uint s_kb[2][64];

void main() {
  const uint gw = LinearGroup();
  if (gw >= pc.N * pc.Hkv * (pc.split != 0u ? pc.NS : 1u)) return;  // uniform over the workgroup, as below
  uint rk, s;  // rk = row · Hkv + KV head
  Unit(gw, rk, s);
  const uint lid = gl_LocalInvocationID.x;
  const uint i = rk / pc.Hkv, kvh = rk % pc.Hkv;  // the host checked Hq == G · Hkv
  const uint off = uint(rows[2u * i]), pos = uint(rows[2u * i + 1u]);
  const uint h0 = i * pc.Hq + kvh * G, KW = pc.Hkv * pc.D;  // (row, head) index of the group's first head
  const uint last = pos / pc.B;
  uint bs, be;
  bool fresh;
  if (!Range(s, last, bs, be, fresh)) return;
  const bool split = pc.split != 0u;
  float m[G], l[G], M[G], L[G];
  float acc[G * 4], ACC[G * 4];  // head g, dims lid + 64·k at g·4 + k (D <= 256)
  [[unroll]] for (uint g = 0u; g < G; ++g) {
    const uint rh = h0 + g, sl = split ? SlotBase(rh, s) : 0u, rb = RunBase() + rh * pc.D;
    m[g] = fresh ? kNegInf : split ? ml[sl] : ml[4u * rh];
    l[g] = fresh ? 0.0 : split ? ml[sl + 1u] : ml[4u * rh + 1u];
    M[g] = fresh || split ? kNegInf : ml[4u * rh + 2u];
    L[g] = fresh || split ? 0.0 : ml[4u * rh + 3u];
    [[unroll]] for (uint k = 0u; k < 4u; ++k) {
      const uint d = lid + 64u * k;
      const bool have = !fresh && d < pc.D;
      acc[g * 4u + k] = !have ? 0.0 : split ? ml[sl + 2u + d] : o[rh * pc.D + d];
      ACC[g * 4u + k] = !have || split ? 0.0 : ml[rb + d];
    }
  }
  for (uint b = bs; b < be; ++b) {
    const uint sb = b & 1u;
    const uint p0 = b * pc.B, n = min(p0 + pc.B, pos + 1u) - p0;
    if (lid < n) {
      const uint kb = PoolRow(off, p0 + lid) * KW + kvh * pc.D;
      s_kb[sb][lid] = kb;
      [[unroll]] for (uint g = 0u; g < G; ++g) s_sc[sb][g * 64u + lid] = Score((h0 + g) * pc.D, kb);
    }
    barrier();
    [[unroll]] for (uint g = 0u; g < G; ++g) {
      float bm = kNegInf;
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
    if (SpanEnds(b, last)) {
      [[unroll]] for (uint g = 0u; g < G; ++g) {
        float c1, c2;
        FoldScalars(M[g], L[g], m[g], l[g], c1, c2);
        [[unroll]] for (uint k = 0u; k < 4u; ++k) {
          ACC[g * 4u + k] = FoldAcc(ACC[g * 4u + k], acc[g * 4u + k], c1, c2);
          acc[g * 4u + k] = 0.0;
        }
        m[g] = kNegInf;
        l[g] = 0.0;
      }
    }
  }
  const bool done = be == last + 1u;
  [[unroll]] for (uint g = 0u; g < G; ++g) {
    const uint rh = h0 + g, sl = split ? SlotBase(rh, s) : 0u, rb = RunBase() + rh * pc.D;
    const float inv = 1.0 / L[g];
    [[unroll]] for (uint k = 0u; k < 4u; ++k) {
      const uint d = lid + 64u * k;
      if (d >= pc.D) continue;
      if (split) {
        ml[sl + 2u + d] = acc[g * 4u + k];
      } else if (done) {
        o[rh * pc.D + d] = ACC[g * 4u + k] * inv;
      } else {
        o[rh * pc.D + d] = acc[g * 4u + k];
        ml[rb + d] = ACC[g * 4u + k];
      }
    }
    if (lid == 0u) {
      if (split) {
        ml[sl] = m[g];
        ml[sl + 1u] = l[g];
      } else if (!done) {
        ml[4u * rh] = m[g];
        ml[4u * rh + 1u] = l[g];
        ml[4u * rh + 2u] = M[g];
        ml[4u * rh + 3u] = L[g];
      }
    }
  }
}
#else
// The span's accumulator element d: in o (unsplit) or in the span's slot (split, at `base` + d either way).
float SpanAcc(uint base, uint d) { return pc.split != 0u ? ml[base + d] : o[base + d]; }
void SetSpanAcc(uint base, uint d, float v) {
  if (pc.split != 0u) {
    ml[base + d] = v;
  } else {
    o[base + d] = v;
  }
}

void main() {
  const uint gi = LinearX();
  if (gi >= pc.N * pc.Hq * (pc.split != 0u ? pc.NS : 1u)) return;
  uint rh, s;
  Unit(gi, rh, s);
  const uint i = rh / pc.Hq, h = rh % pc.Hq, kvh = h / (pc.Hq / pc.Hkv);
  const uint off = uint(rows[2u * i]), pos = uint(rows[2u * i + 1u]);
  const uint qb = rh * pc.D, KW = pc.Hkv * pc.D;
  const uint last = pos / pc.B;  // the block holding the row's own position
  uint bs, be;
  bool fresh;
  if (!Range(s, last, bs, be, fresh)) return;
  const bool split = pc.split != 0u;
  const uint ab = split ? SlotBase(rh, s) + 2u : qb;  // the span's accumulator
  const uint rb = RunBase() + rh * pc.D;              // the running ACC (unsplit)
  float m = kNegInf, M = kNegInf, L = 0.0;
  precise float l = 0.0;
  if (fresh) {
    for (uint d = 0u; d < pc.D; ++d) {
      SetSpanAcc(ab, d, 0.0);
      if (!split) ml[rb + d] = 0.0;
    }
  } else {
    m = split ? ml[ab - 2u] : ml[4u * rh];
    l = split ? ml[ab - 1u] : ml[4u * rh + 1u];
    if (!split) {
      M = ml[4u * rh + 2u];
      L = ml[4u * rh + 3u];
    }
  }
  for (uint b = bs; b < be; ++b) {
    const uint p0 = b * pc.B, p1 = min(p0 + pc.B, pos + 1u);
    float bm = kNegInf;
    for (uint p = p0; p < p1; ++p) bm = max(bm, Score(qb, PoolRow(off, p) * KW + kvh * pc.D));
    const float mn = max(m, bm);
    if (mn != m) {  // rescale what came before (exp(m - mn); the span's first block: acc and l are 0)
      precise const float dm = m - mn;
      const float c = exp(dm);
      precise const float lc = l * c;
      l = lc;
      for (uint d = 0u; d < pc.D; ++d) {
        precise const float a = SpanAcc(ab, d) * c;
        SetSpanAcc(ab, d, a);
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
        SetSpanAcc(ab, d, SpanAcc(ab, d) + t);
      }
    }
    if (SpanEnds(b, last)) {
      float c1, c2;
      FoldScalars(M, L, m, l, c1, c2);
      for (uint d = 0u; d < pc.D; ++d) {
        ml[rb + d] = FoldAcc(ml[rb + d], o[qb + d], c1, c2);
        o[qb + d] = 0.0;
      }
      m = kNegInf;
      l = 0.0;
    }
  }
  if (split) {
    ml[ab - 2u] = m;
    ml[ab - 1u] = l;
  } else if (be == last + 1u) {
    const float inv = 1.0 / L;
    for (uint d = 0u; d < pc.D; ++d) o[qb + d] = ml[rb + d] * inv;
  } else {
    ml[4u * rh] = m;
    ml[4u * rh + 1u] = l;
    ml[4u * rh + 2u] = M;
    ml[4u * rh + 3u] = L;
  }
}
#endif
#endif
