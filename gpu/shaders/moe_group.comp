#version 450
// Groups the rows of an expert-indexed matmul by expert for its tile kernel (matmul.comp MAT_ID with MM_TILE):
// ord (filled with -1 by the host first) receives, expert by expert in ascending order, the rows t < N with
// ids[t] == e, each expert's run starting at a multiple of 16 (so a tile of 16 or 8 entries holds one expert's
// rows, padding -1). One workgroup; the counts and each run's cursor are shared-memory integer atomics, so the
// order of the rows inside a run may differ between runs: a row's arithmetic does not depend on its place in a
// tile, so the bits do not. Expert numbers outside [0, X) (never from moe_route) are left out.
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer I { int ids[]; };  // [N]
layout(std430, binding = 1) buffer O { int ord[]; };           // [L]
layout(push_constant) uniform P { uint N; uint X; } pc;
#define MAX_X 1024u  // the host checks X <= MAX_X
shared uint cnt[MAX_X];
shared uint off[MAX_X];

void main() {
  const uint lid = gl_LocalInvocationID.x;
  for (uint e = lid; e < pc.X; e += 64u) cnt[e] = 0u;
  barrier();
  for (uint t = lid; t < pc.N; t += 64u) {
    const uint e = uint(ids[t]);
    if (e < pc.X) atomicAdd(cnt[e], 1u);
  }
  barrier();
  if (lid == 0u) {
    uint o = 0u;
    for (uint e = 0u; e < pc.X; ++e) {
      off[e] = o;
      o += (cnt[e] + 15u) & ~15u;
      cnt[e] = 0u;
    }
  }
  barrier();
  for (uint t = lid; t < pc.N; t += 64u) {
    const uint e = uint(ids[t]);
    if (e < pc.X) ord[off[e] + atomicAdd(cnt[e], 1u)] = int(t);
  }
}
