#version 450
// The gated delta rule, strictly token by token, one invocation per (sequence, value head h, state row j):
// row j of the state (S key channels) reads only itself, k, q and v[j] (kernels::GdnHeadSteps), so the same
// kernel serves prefill, decode and verify, and a token's bits do not depend on the batch. A dispatch runs tokens
// [t0, t1) of each sequence (the host splits long runs where the driver limits loop iterations, lavapipe); the
// state is in memory between tokens either way, so the split does not change a bit.
layout(local_size_x = 64) in;
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(std430, binding = 0) readonly buffer U { float u[]; };     // [N][C] q Kd | k Kd | v Vd (q, k normalised)
layout(std430, binding = 1) readonly buffer B { float beta[]; };  // [N][Hv]
layout(std430, binding = 2) readonly buffer G { float g[]; };     // [N][Hv]
layout(std430, binding = 3) buffer M { float st[]; };             // [slots][Hv][S][S]
layout(std430, binding = 4) writeonly buffer O { float o[]; };    // [N][Vd]
layout(std430, binding = 5) readonly buffer Q { int seqs[]; };    // [n_seqs][4] {row0, n, slot, -}
layout(push_constant) uniform P { uint n_seqs; uint Hv; uint S; uint C; uint Kd; uint key_div; uint key_mod; uint t0; uint t1; } pc;

// A dispatch keeps each invocation's state row in shared memory from its first token to its last (rows up to
// kMaxS values; longer rows stay in `st`): a GPU then reads and writes the row once per dispatch instead of twice
// per token, and at a given i the 64 invocations touch consecutive words (the row layout in `st` puts them S
// words apart). Where a value lives changes no arithmetic: the same operations in the same order.
const uint kMaxS = 128u;
shared float row_sh[kMaxS * 64u];  // [i][invocation], 32 KiB

void main() {
  const uint gid = LinearX();
  if (gid >= pc.n_seqs * pc.Hv * pc.S) return;
  const uint s = gid / (pc.Hv * pc.S), h = (gid / pc.S) % pc.Hv, j = gid % pc.S;
  const uint row0 = uint(seqs[4u * s]), n = uint(seqs[4u * s + 1u]), slot = uint(seqs[4u * s + 2u]);
  const uint t_end = min(n, pc.t1);
  if (pc.t0 >= t_end) return;
  // ModelConfig::KeyHead: h mod Hk (qwen35, key_div = 1) or h / r (qwen3next, key_mod = huge).
  const uint kh = (h / pc.key_div) % pc.key_mod;
  const uint mb = ((slot * pc.Hv + h) * pc.S + j) * pc.S;
  const float scale = 1.0 / sqrt(float(pc.S));
  const bool in_sh = pc.S <= kMaxS;
  const uint lj = gl_LocalInvocationID.x;
  if (in_sh)
    for (uint i = 0u; i < pc.S; ++i) row_sh[i * 64u + lj] = st[mb + i];
  for (uint t = pc.t0; t < t_end; ++t) {
    const uint row = row0 + t;
    const uint qb = row * pc.C + kh * pc.S, kb = qb + pc.Kd, vi = row * pc.C + 2u * pc.Kd + h * pc.S + j;
    const float decay = exp(g[row * pc.Hv + h]);
    precise float kv = 0.0;
    for (uint i = 0u; i < pc.S; ++i) {
      precise const float m = (in_sh ? row_sh[i * 64u + lj] : st[mb + i]) * decay;
      if (in_sh) row_sh[i * 64u + lj] = m; else st[mb + i] = m;
      precise const float p = m * u[kb + i];
      kv += p;
    }
    precise const float delta = (u[vi] - kv) * beta[row * pc.Hv + h];
    precise float out_ = 0.0;
    for (uint i = 0u; i < pc.S; ++i) {
      precise const float upd = u[kb + i] * delta;
      precise const float m = (in_sh ? row_sh[i * 64u + lj] : st[mb + i]) + upd;
      if (in_sh) row_sh[i * 64u + lj] = m; else st[mb + i] = m;
      precise const float p = m * u[qb + i];
      out_ += p;
    }
    o[row * (pc.Hv * pc.S) + h * pc.S + j] = out_ * scale;
  }
  if (in_sh)
    for (uint i = 0u; i < pc.S; ++i) st[mb + i] = row_sh[i * 64u + lj];
}
