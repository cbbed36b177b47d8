#version 450
// Causal softmax attention, one invocation per (batch row, query head): keys in ascending position, scores in
// one pass for the maximum, then exp-weighted values in the same order (a fixed order for every batch shape,
// split nowhere, no atomics). K and V rows live in one buffer per layer: sequence s's position p at row
// kv_base(s) + p. GQA: query head h reads KV head h / (Hq / Hkv).
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Qb { float q[]; };    // [N][Hq·D]
layout(std430, binding = 1) readonly buffer Kb { float kc[]; };   // [rows][Hkv·D]
layout(std430, binding = 2) readonly buffer Vb { float vc[]; };   // [rows][Hkv·D]
layout(std430, binding = 3) buffer Ob { float o[]; };             // [N][Hq·D]
layout(std430, binding = 4) readonly buffer R { int rows[]; };    // [N][2] {kv row of the first key, position}
layout(push_constant) uniform P { uint N; uint Hq; uint Hkv; uint D; float scale; } pc;

void main() {
  const uint gid = gl_GlobalInvocationID.x;
  if (gid >= pc.N * pc.Hq) return;
  const uint i = gid / pc.Hq, h = gid % pc.Hq, kvh = h / (pc.Hq / pc.Hkv);
  const uint base = uint(rows[2u * i]), pos = uint(rows[2u * i + 1u]);
  const uint qb = i * pc.Hq * pc.D + h * pc.D, KW = pc.Hkv * pc.D;
  float mx = -1.0 / 0.0;
  for (uint p = 0u; p <= pos; ++p) {
    const uint kb = (base + p) * KW + kvh * pc.D;
    precise float sc = 0.0;
    for (uint d = 0u; d < pc.D; ++d) {
      precise const float t = q[qb + d] * kc[kb + d];
      sc += t;
    }
    mx = max(mx, sc * pc.scale);
  }
  for (uint d = 0u; d < pc.D; ++d) o[qb + d] = 0.0;
  precise float den = 0.0;
  for (uint p = 0u; p <= pos; ++p) {
    const uint kb = (base + p) * KW + kvh * pc.D;
    precise float sc = 0.0;
    for (uint d = 0u; d < pc.D; ++d) {
      precise const float t = q[qb + d] * kc[kb + d];
      sc += t;
    }
    const float w = exp(sc * pc.scale - mx);
    den += w;
    for (uint d = 0u; d < pc.D; ++d) {
      precise const float t = w * vc[kb + d];
      o[qb + d] = o[qb + d] + t;
    }
  }
  const float inv = 1.0 / den;
  for (uint d = 0u; d < pc.D; ++d) o[qb + d] = o[qb + d] * inv;
}
