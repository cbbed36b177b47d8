#version 450
// x = H·x per chunk of `size` floats (a power of two): the Walsh-Hadamard rotation of the quantised KV caches, the
// CPU's kernels::HadamardRotate bit for bit: each element times scale (the host's 1 / sqrt(size)), then butterfly
// passes (u + v, u - v) of widths 1, 2, 4, ..., each operation rounded once. One invocation per chunk, in place.
layout(local_size_x = 64) in;
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(std430, binding = 0) buffer Xb { float x[]; };
layout(push_constant) uniform P { uint n_chunks; uint size; float scale; } pc;

void main() {
  const uint c = LinearX();
  if (c >= pc.n_chunks) return;
  const uint b = c * pc.size;
  for (uint j = 0u; j < pc.size; ++j) {
    precise const float s = x[b + j] * pc.scale;
    x[b + j] = s;
  }
  for (uint len = 1u; len < pc.size; len <<= 1)
    for (uint i = 0u; i < pc.size; i += 2u * len)
      for (uint j = i; j < i + len; ++j) {
        const float u = x[b + j], v = x[b + j + len];
        precise const float s = u + v;
        precise const float d = u - v;
        x[b + j] = s;
        x[b + j + len] = d;
      }
}
