#version 450
// The softmax router per token (kernels::SoftmaxTopK): softmax over the X expert logits (max subtracted, the sum
// of the float exps in double, one float reciprocal), the top K by descending probability with ties to the lower
// expert index, and their weights divided by their float sum in k order (floored at 2^-14). The k-th pick is the
// largest probability after the previous pick in (probability descending, index ascending) order: the order of
// a stable sort, found in X·K steps without a list of taken experts. One invocation per token.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer L { float l[]; };             // [N][X] logits in, probabilities out
layout(std430, binding = 1) writeonly buffer S { int sel[]; };   // [N][K] experts
layout(std430, binding = 2) buffer Wt { float wt[]; };           // [N][K] weights
layout(push_constant) uniform P { uint N; uint X; uint K; } pc;

void main() {
  const uint i = LinearX();
  if (i >= pc.N) return;
  const uint b = i * pc.X, o = i * pc.K;
  float mx = -1.0 / 0.0;
  for (uint e = 0u; e < pc.X; ++e) mx = max(mx, l[b + e]);
  precise double sum = 0.0LF;
  for (uint e = 0u; e < pc.X; ++e) {
    precise const float d = l[b + e] - mx;
    const float v = exp(d);
    l[b + e] = v;
    sum += double(v);
  }
  precise const double invd = 1.0LF / sum;
  const float inv = float(invd);
  for (uint e = 0u; e < pc.X; ++e) {
    precise const float p = l[b + e] * inv;
    l[b + e] = p;
  }
  float pv = 0.0;
  int pi = -1;
  precise float s = 0.0;
  for (uint k = 0u; k < pc.K; ++k) {
    int best = -1;
    float bv = 0.0;
    for (uint e = 0u; e < pc.X; ++e) {
      const float v = l[b + e];
      const bool after = pi < 0 || v < pv || (v == pv && int(e) > pi);
      if (after && (best < 0 || v > bv)) {
        best = int(e);
        bv = v;
      }
    }
    sel[o + k] = best;
    wt[o + k] = bv;
    s += bv;
    pv = bv;
    pi = best;
  }
  s = max(s, 6.103515625e-5);
  for (uint k = 0u; k < pc.K; ++k) {
    precise const float w = wt[o + k] / s;
    wt[o + k] = w;
  }
}
