#version 450
// A forward's new K (or V) rows stored into a layer's device page pool in the cache type t (kv_types.glsl), the
// bytes the CPU's kernels::QuantizeKvRow writes: f32 as is; f16 and bf16 rounded to nearest even, two to a word
// (KW even); the block types quantised per 32 elements by llama.cpp's quantize_row_*_ref arithmetic (the CPU's
// gguf quantisers and IQ4_NL's): the same comparisons, each float operation rounded once (`precise`: no fused
// multiply-add). pool row tab[2r + 1] = row tab[2r] of x. One invocation per pool word (f32, f16, bf16) or
// block.
layout(local_size_x = 64) in;
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "kv_types.glsl"
layout(std430, binding = 0) readonly buffer X { float x[]; };  // [N][KW]
layout(std430, binding = 1) buffer P { uint p[]; };
layout(std430, binding = 1) buffer P8 { uint8_t p8[]; };      // the same bytes
layout(std430, binding = 2) readonly buffer T { int tab[]; };  // [n][2] {batch row, pool row}
layout(push_constant) uniform PC { uint n; uint KW; uint t; } pc;

// The CPU's TruncToInt: NaN -> 0, clamped to [lo, hi], else truncated toward zero.
int TruncToInt(float v, int lo, int hi) {
  if (!(v == v)) return 0;
  if (v <= float(lo)) return lo;
  if (v >= float(hi)) return hi;
  return int(v);
}
// std::round (halves away from zero), clamped to int8.
int RoundAway(float v) {
  if (!(v == v)) return 0;
  float r = trunc(v);
  if (abs(v - r) >= 0.5) r += sign(v);  // v - r is exact
  return TruncToInt(r, -128, 127);
}
void Put16(uint at, uint h) {
  p8[at] = uint8_t(h & 0xFFu);
  p8[at + 1u] = uint8_t(h >> 8);
}
// The index of kIq4Nl nearest to v (ties to the upper index unless v is strictly closer to the lower): the CPU's
// NearestIq4Index, llama.cpp's best_index_int8.
int NearestIq4(float v) {
  if (v <= float(kIq4Nl[0])) return 0;
  if (v >= float(kIq4Nl[15])) return 15;
  int lo = 0, hi = 15;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (v < float(kIq4Nl[mid])) hi = mid;
    else lo = mid;
  }
  precise const float below = v - float(kIq4Nl[hi - 1]);
  precise const float above = float(kIq4Nl[hi]) - v;
  return below < above ? hi - 1 : hi;
}

void main() {
  const uint t = pc.t;
  const uint per = t == KV_F32 ? 1u : (t == KV_F16 || t == KV_BF16) ? 2u : 32u;  // elements per unit
  const uint U = pc.KW / per;                                                   // units per row
  const uint e = LinearX();
  if (e >= pc.n * U) return;
  const uint i = e / U, u = e % U;
  const uint src = uint(tab[2u * i]) * pc.KW + u * per, row = uint(tab[2u * i + 1u]);
  if (t == KV_F32) {
    p[row * pc.KW + u] = floatBitsToUint(x[src]);
    return;
  }
  if (per == 2u) {
    const uint lo = t == KV_F16 ? F32ToF16(x[src]) : F32ToBf16(x[src]);
    const uint hi = t == KV_F16 ? F32ToF16(x[src + 1u]) : F32ToBf16(x[src + 1u]);
    p[row * U + u] = lo | (hi << 16);
    return;
  }
  float v[32];
  for (uint j = 0u; j < 32u; ++j) v[j] = x[src + j];
  const uint base = (row * U + u) * KvBlockBytes(t);
  if (t == KV_Q8_0) {
    float amax = 0.0;
    for (uint j = 0u; j < 32u; ++j) amax = amax < abs(v[j]) ? abs(v[j]) : amax;
    precise const float d = amax / 127.0;
    precise const float id = d != 0.0 ? 1.0 / d : 0.0;
    Put16(base, F32ToF16(d));
    for (uint j = 0u; j < 32u; ++j) {
      precise const float s = v[j] * id;
      p8[base + 2u + j] = uint8_t(uint(RoundAway(s)) & 0xFFu);
    }
    return;
  }
  if (t == KV_Q4_1 || t == KV_Q5_1) {  // min and max; d = (max - min) / (2^bits - 1), m = min
    float mn = 3.402823466e+38, mx = -3.402823466e+38;
    for (uint j = 0u; j < 32u; ++j) {
      if (v[j] < mn) mn = v[j];
      if (v[j] > mx) mx = v[j];
    }
    const bool five = t == KV_Q5_1;
    precise const float d = (mx - mn) / (five ? 31.0 : 15.0);
    precise const float id = d != 0.0 ? 1.0 / d : 0.0;
    Put16(base, F32ToF16(d));
    Put16(base + 2u, F32ToF16(mn));
    uint qh = 0u;
    for (uint j = 0u; j < 16u; ++j) {
      precise const float a0 = (v[j] - mn) * id + 0.5;
      precise const float a1 = (v[j + 16u] - mn) * id + 0.5;
      const int q0 = min(five ? 31 : 15, TruncToInt(a0, 0, 127));
      const int q1 = min(five ? 31 : 15, TruncToInt(a1, 0, 127));
      p8[base + KvQsOff(t) + j] = uint8_t(uint((q0 & 0x0F) | ((q1 & 0x0F) << 4)) & 0xFFu);
      qh |= uint((q0 & 0x10) >> 4) << j;
      qh |= uint((q1 & 0x10) >> 4) << (j + 16u);
    }
    if (five)
      for (uint b = 0u; b < 4u; ++b) p8[base + 4u + b] = uint8_t((qh >> (8u * b)) & 0xFFu);
    return;
  }
  // Q4_0, Q5_0 and IQ4_NL: the value of largest magnitude (the first such) sets the scale.
  float amax = 0.0, mx = 0.0;
  for (uint j = 0u; j < 32u; ++j)
    if (amax < abs(v[j])) {
      amax = abs(v[j]);
      mx = v[j];
    }
  if (t == KV_IQ4_NL) {  // scale max / -127 picks the indices, then the least-squares scale (weights x²)
    uint idx[32];
    float d = 0.0;
    for (uint j = 0u; j < 32u; ++j) idx[j] = 0u;
    if (amax >= 1e-15) {
      precise const float id = 1.0 / (mx / -127.0);
      precise float sumqx = 0.0, sumq2 = 0.0;
      for (uint j = 0u; j < 32u; ++j) {
        precise const float s = id * v[j];
        const int l = NearestIq4(s);
        idx[j] = uint(l);
        const float q = float(kIq4Nl[l]);
        precise const float w = v[j] * v[j];
        precise const float wq = w * q;
        precise const float a = wq * v[j];
        precise const float b = wq * q;
        sumqx = sumqx + a;
        sumq2 = sumq2 + b;
      }
      precise const float r = sumq2 > 0.0 ? sumqx / sumq2 : 0.0;
      d = r;
    }
    Put16(base, F32ToF16(d));
    for (uint j = 0u; j < 16u; ++j) p8[base + 2u + j] = uint8_t(idx[j] | (idx[j + 16u] << 4));
    return;
  }
  const bool five = t == KV_Q5_0;
  precise const float d = mx / (five ? -16.0 : -8.0);
  precise const float id = d != 0.0 ? 1.0 / d : 0.0;
  Put16(base, F32ToF16(d));
  uint qh = 0u;
  for (uint j = 0u; j < 16u; ++j) {
    precise const float a0 = v[j] * id + (five ? 16.5 : 8.5);
    precise const float a1 = v[j + 16u] * id + (five ? 16.5 : 8.5);
    const int q0 = min(five ? 31 : 15, TruncToInt(a0, five ? 0 : -128, 127));
    const int q1 = min(five ? 31 : 15, TruncToInt(a1, five ? 0 : -128, 127));
    p8[base + KvQsOff(t) + j] = uint8_t(uint((q0 & 0x0F) | ((q1 & 0x0F) << 4)) & 0xFFu);
    qh |= uint((q0 & 0x10) >> 4) << j;
    qh |= uint((q1 & 0x10) >> 4) << (j + 16u);
  }
  if (five)
    for (uint b = 0u; b < 4u; ++b) p8[base + 2u + b] = uint8_t((qh >> (8u * b)) & 0xFFu);
}
