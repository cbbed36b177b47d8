// K formats: Q4_K, Q5_K, Q6_K weights and Q8_K activations (spec sections 3.8-3.11, 4).
// Quantisers follow llama.cpp's quantize_row_*_ref (no importance matrix); dot products follow the generic C
// kernels (ggml_vec_dot_*_q8_K_generic): integer sums per sub-block into 8 int32 lanes, then 8 float lanes.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "gguf/quants_k.h"

namespace rw::gguf {
namespace {

constexpr float kGroupMaxEps = 1e-15f;

// llama.cpp nearest_int: round to nearest even via the 1.5*2^23 trick (exact for |v| < 2^22).
inline int NearestInt(float fval) {
  const float val = fval + 12582912.f;
  int32_t i;
  std::memcpy(&i, &val, 4);
  return (i & 0x007FFFFF) - 0x00400000;
}

// llama.cpp make_qkx2_quants: asymmetric quantisation of n values to [0, nmax] with a scale/min search.
// Returns the scale; *the_min receives -min (>= 0).
float MakeQkx2Quants(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* the_min,
                     uint8_t* Laux, float rmin, float rdelta, int nstep) {
  float min = x[0], max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float w = weights[i];
    sum_w += w;
    sum_x += w * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *the_min = -min;
    return 0.f;
  }
  float iscale = nmax / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    const int l = NearestInt(iscale * (x[i] - min));
    L[i] = static_cast<uint8_t>(std::max(0, std::min(nmax, l)));
    const float diff = scale * L[i] + min - x[i];
    best_error += weights[i] * (diff * diff);
  }
  if (nstep < 1) {
    *the_min = -min;
    return scale;
  }
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * is + nmax) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      int l = NearestInt(iscale * (x[i] - min));
      l = std::max(0, std::min(nmax, l));
      Laux[i] = static_cast<uint8_t>(l);
      const float w = weights[i];
      sum_l += w * l;
      sum_l2 += w * l * l;
      sum_xl += w * l * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0;
      for (int i = 0; i < n; ++i) {
        const float diff = this_scale * Laux[i] + this_min - x[i];
        cur_error += weights[i] * (diff * diff);
      }
      if (cur_error < best_error) {
        for (int i = 0; i < n; ++i) L[i] = Laux[i];
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *the_min = -min;
  return scale;
}

// llama.cpp make_qx_quants with rmse_type 1 and no importance: symmetric quantisation to [-nmax, nmax-1]
// (stored as L + nmax) with a scale search weighted by x^2. Returns the scale.
float MakeQxQuants(int n, int nmax, const float* x, int8_t* L) {
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.f;
  }
  float iscale = -nmax / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    int l = NearestInt(iscale * x[i]);
    l = std::max(-nmax, std::min(nmax - 1, l));
    L[i] = static_cast<int8_t>(l + nmax);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  float scale = suml2 ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(nmax + 0.1f * is) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      int l = NearestInt(iscale * x[i]);
      l = std::max(-nmax, std::min(nmax - 1, l));
      const float w = x[i] * x[i];
      sumlx += w * x[i] * l;
      suml2 += w * l * l;
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) {
        const int l = NearestInt(iscale * x[i]);
        L[i] = static_cast<int8_t>(nmax + std::max(-nmax, std::min(nmax - 1, l)));
      }
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// Shared by Q4_K and Q5_K: per-sub-block scales/mins search, 6-bit packing and final quants L[256] in
// [0, nmax]. Writes d, dmin and scales of the block through the pointers.
void QuantizeKScalesMins(const float* x, int nmax, float rmin, float rdelta, int nstep, uint16_t* d_out,
                         uint16_t* dmin_out, uint8_t* packed, uint8_t* L) {
  uint8_t Laux[32];
  float weights[32];
  float mins[8], scales[8];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
    scales[j] = MakeQkx2Quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, rmin, rdelta, nstep);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  for (int j = 0; j < 8; ++j) {
    const uint8_t ls = static_cast<uint8_t>(std::min(63, NearestInt(inv_scale * scales[j]) & 0xFF));
    const uint8_t lm = static_cast<uint8_t>(std::min(63, NearestInt(inv_min * mins[j]) & 0xFF));
    if (j < 4) {
      packed[j] = ls;
      packed[j + 4] = lm;
    } else {
      packed[j + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
      packed[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
      packed[j] |= static_cast<uint8_t>((lm >> 4) << 6);
    }
  }
  *d_out = Fp32ToFp16(max_scale / 63.f);
  *dmin_out = Fp32ToFp16(max_min / 63.f);
  const float d_all = Fp16ToFp32(*d_out), dmin_all = Fp16ToFp32(*dmin_out);
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    GetScaleMinK4(j, packed, &sc, &m);
    const float d = d_all * sc;
    if (!d) continue;
    const float dm = dmin_all * m;
    for (int ii = 0; ii < 32; ++ii) {
      const int l = NearestInt((x[32 * j + ii] + dm) / d);
      L[32 * j + ii] = static_cast<uint8_t>(std::max(0, std::min(nmax, l)));
    }
  }
}

}  // namespace

// ---- Dequantisation ---------------------------------------------------------------------------------------

void DequantQ4_K(const BlockQ4_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = Fp16ToFp32(x[i].d), dmin = Fp16ToFp32(x[i].dmin);
    const uint8_t* q = x[i].qs;
    for (int c = 0; c < 4; ++c, q += 32) {
      uint8_t sc, m;
      GetScaleMinK4(2 * c, x[i].scales, &sc, &m);
      const float d1 = d * sc, m1 = dmin * m;
      GetScaleMinK4(2 * c + 1, x[i].scales, &sc, &m);
      const float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * (q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * (q[l] >> 4) - m2;
    }
  }
}

void DequantQ5_K(const BlockQ5_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = Fp16ToFp32(x[i].d), dmin = Fp16ToFp32(x[i].dmin);
    const uint8_t* ql = x[i].qs;
    const uint8_t* qh = x[i].qh;
    uint8_t u1 = 1, u2 = 2;
    for (int c = 0; c < 4; ++c, ql += 32, u1 <<= 2, u2 <<= 2) {
      uint8_t sc, m;
      GetScaleMinK4(2 * c, x[i].scales, &sc, &m);
      const float d1 = d * sc, m1 = dmin * m;
      GetScaleMinK4(2 * c + 1, x[i].scales, &sc, &m);
      const float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * ((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
    }
  }
}

void DequantQ6_K(const BlockQ6_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = Fp16ToFp32(x[i].d);
    const uint8_t* ql = x[i].ql;
    const uint8_t* qh = x[i].qh;
    const int8_t* sc = x[i].scales;
    for (int n = 0; n < 2; ++n, y += 128, ql += 64, qh += 32, sc += 8) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l + 0] = d * sc[is + 0] * q1;
        y[l + 32] = d * sc[is + 2] * q2;
        y[l + 64] = d * sc[is + 4] * q3;
        y[l + 96] = d * sc[is + 6] * q4;
      }
    }
  }
}

void DequantQ8_K(const BlockQ8_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = x[i].d;
    for (int j = 0; j < kQK_K; ++j) *y++ = d * x[i].qs[j];
  }
}

// ---- Quantisation -----------------------------------------------------------------------------------------

void QuantQ4_K(const float* x, BlockQ4_K* y, int64_t nb) {
  uint8_t L[kQK_K];
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    uint16_t d, dmin;
    uint8_t scales[12] = {};
    QuantizeKScalesMins(x, 15, -1.f, 0.1f, 20, &d, &dmin, scales, L);
    y[i].d = d;
    y[i].dmin = dmin;
    std::memcpy(y[i].scales, scales, 12);
    uint8_t* q = y[i].qs;
    for (int j = 0; j < kQK_K; j += 64, q += 32) {
      for (int l = 0; l < 32; ++l) q[l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 4));
    }
  }
}

void QuantQ5_K(const float* x, BlockQ5_K* y, int64_t nb) {
  uint8_t L[kQK_K];
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    uint16_t d, dmin;
    uint8_t scales[12] = {};
    QuantizeKScalesMins(x, 31, -0.5f, 0.1f, 15, &d, &dmin, scales, L);
    y[i].d = d;
    y[i].dmin = dmin;
    std::memcpy(y[i].scales, scales, 12);
    uint8_t* qh = y[i].qh;
    uint8_t* ql = y[i].qs;
    std::memset(qh, 0, 32);
    uint8_t m1 = 1, m2 = 2;
    for (int n = 0; n < kQK_K; n += 64, m1 <<= 2, m2 <<= 2, ql += 32) {
      for (int j = 0; j < 32; ++j) {
        int l1 = L[n + j];
        if (l1 > 15) {
          l1 -= 16;
          qh[j] |= m1;
        }
        int l2 = L[n + j + 32];
        if (l2 > 15) {
          l2 -= 16;
          qh[j] |= m2;
        }
        ql[j] = static_cast<uint8_t>(l1 | (l2 << 4));
      }
    }
  }
}

void QuantQ6_K(const float* x, BlockQ6_K* y, int64_t nb) {
  int8_t L[kQK_K];
  float scales[kQK_K / 16];
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    float max_scale = 0, max_abs_scale = 0;
    for (int ib = 0; ib < kQK_K / 16; ++ib) {
      const float scale = MakeQxQuants(16, 32, x + 16 * ib, L + 16 * ib);
      scales[ib] = scale;
      const float abs_scale = std::fabs(scale);
      if (abs_scale > max_abs_scale) {
        max_abs_scale = abs_scale;
        max_scale = scale;
      }
    }
    if (max_abs_scale < kGroupMaxEps) {
      std::memset(&y[i], 0, sizeof(BlockQ6_K));
      continue;
    }
    const float iscale = -128.f / max_scale;
    y[i].d = Fp32ToFp16(1 / iscale);
    for (int ib = 0; ib < kQK_K / 16; ++ib) {
      y[i].scales[ib] = static_cast<int8_t>(std::min(127, NearestInt(iscale * scales[ib])));
    }
    const float d_all = Fp16ToFp32(y[i].d);
    for (int j = 0; j < kQK_K / 16; ++j) {
      const float d = d_all * y[i].scales[j];
      if (!d) continue;
      for (int ii = 0; ii < 16; ++ii) {
        const int l = NearestInt(x[16 * j + ii] / d);
        L[16 * j + ii] = static_cast<int8_t>(std::max(-32, std::min(31, l)) + 32);
      }
    }
    uint8_t* ql = y[i].ql;
    uint8_t* qh = y[i].qh;
    for (int j = 0; j < kQK_K; j += 128, ql += 64, qh += 32) {
      for (int l = 0; l < 32; ++l) {
        const uint8_t q1 = L[j + l + 0] & 0xF, q2 = L[j + l + 32] & 0xF;
        const uint8_t q3 = L[j + l + 64] & 0xF, q4 = L[j + l + 96] & 0xF;
        ql[l + 0] = static_cast<uint8_t>(q1 | (q3 << 4));
        ql[l + 32] = static_cast<uint8_t>(q2 | (q4 << 4));
        qh[l] = static_cast<uint8_t>((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) |
                                     ((L[j + l + 64] >> 4) << 4) | ((L[j + l + 96] >> 4) << 6));
      }
    }
  }
}

void QuantQ8_K(const float* x, BlockQ8_K* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    float max = 0, amax = 0;
    for (int j = 0; j < kQK_K; ++j) {
      const float ax = std::fabs(x[j]);
      if (ax > amax) {
        amax = ax;
        max = x[j];
      }
    }
    if (!amax) {  // all zero (or NaN): llama.cpp leaves bsums unset; we zero them
      std::memset(&y[i], 0, sizeof(BlockQ8_K));
      continue;
    }
    const float iscale = -127.f / max;
    for (int j = 0; j < kQK_K; ++j) {
      const int v = NearestInt(iscale * x[j]);
      y[i].qs[j] = static_cast<int8_t>(std::max(-128, std::min(127, v)));
    }
    for (int g = 0; g < kQK_K / 16; ++g) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += y[i].qs[16 * g + l];
      y[i].bsums[g] = static_cast<int16_t>(sum);
    }
    y[i].d = 1 / iscale;
  }
}

// ---- Dot products (generic C numerics) --------------------------------------------------------------------

namespace {

// Unpacks the 8 six-bit scales and mins of a Q4_K/Q5_K block.
inline void UnpackScalesMins(const uint8_t* packed, uint8_t* scales, uint8_t* mins) {
  for (int j = 0; j < 8; ++j) GetScaleMinK4(j, packed, &scales[j], &mins[j]);
}

// aux32[l] += scale * q8[k] * a[k] for k = l mod 8 over `count` elements (count a multiple of 8).
inline void AccumulateLanes(int32_t* aux32, int scale, const int8_t* q8, const int8_t* a, int count) {
  for (int k = 0; k < count; k += 8) {
    for (int l = 0; l < 8; ++l) aux32[l] += scale * static_cast<int16_t>(q8[k + l] * a[k + l]);
  }
}

}  // namespace

float DotQ4_K(const BlockQ4_K* x, const BlockQ8_K* y, int64_t nb) {
  int8_t aux8[kQK_K];
  float sums[8] = {};
  float sumf = 0;
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* q4 = x[i].qs;
    int8_t* a = aux8;
    for (int j = 0; j < 4; ++j, q4 += 32, a += 64) {
      for (int l = 0; l < 32; ++l) a[l] = static_cast<int8_t>(q4[l] & 0xF);
      for (int l = 0; l < 32; ++l) a[l + 32] = static_cast<int8_t>(q4[l] >> 4);
    }
    uint8_t scales[8], mins[8];
    UnpackScalesMins(x[i].scales, scales, mins);
    int sumi = 0;
    for (int j = 0; j < 16; ++j) sumi += y[i].bsums[j] * mins[j / 2];
    int32_t aux32[8] = {};
    for (int j = 0; j < 8; ++j) AccumulateLanes(aux32, scales[j], y[i].qs + 32 * j, aux8 + 32 * j, 32);
    const float d = Fp16ToFp32(x[i].d) * y[i].d;
    for (int l = 0; l < 8; ++l) sums[l] += d * static_cast<float>(aux32[l]);
    const float dmin = Fp16ToFp32(x[i].dmin) * y[i].d;
    sumf -= dmin * static_cast<float>(sumi);
  }
  for (int l = 0; l < 8; ++l) sumf += sums[l];
  return sumf;
}

float DotQ5_K(const BlockQ5_K* x, const BlockQ8_K* y, int64_t nb) {
  int8_t aux8[kQK_K];
  float sums[8] = {};
  float sumf = 0;
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* q4 = x[i].qs;
    const uint8_t* hm = x[i].qh;
    int8_t* a = aux8;
    uint8_t m = 1;
    for (int j = 0; j < 4; ++j, q4 += 32, a += 64, m <<= 2) {
      for (int l = 0; l < 32; ++l) a[l] = static_cast<int8_t>((q4[l] & 0xF) + (hm[l] & m ? 16 : 0));
      for (int l = 0; l < 32; ++l) a[l + 32] = static_cast<int8_t>((q4[l] >> 4) + (hm[l] & (m << 1) ? 16 : 0));
    }
    uint8_t scales[8], mins[8];
    UnpackScalesMins(x[i].scales, scales, mins);
    int sumi = 0;
    for (int j = 0; j < 16; ++j) sumi += y[i].bsums[j] * mins[j / 2];
    int32_t aux32[8] = {};
    for (int j = 0; j < 8; ++j) AccumulateLanes(aux32, scales[j], y[i].qs + 32 * j, aux8 + 32 * j, 32);
    const float d = Fp16ToFp32(x[i].d) * y[i].d;
    for (int l = 0; l < 8; ++l) sums[l] += d * static_cast<float>(aux32[l]);
    const float dmin = Fp16ToFp32(x[i].dmin) * y[i].d;
    sumf -= dmin * static_cast<float>(sumi);
  }
  for (int l = 0; l < 8; ++l) sumf += sums[l];
  return sumf;
}

float DotQ6_K(const BlockQ6_K* x, const BlockQ8_K* y, int64_t nb) {
  int8_t aux8[kQK_K];
  float sums[8] = {};
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* q4 = x[i].ql;
    const uint8_t* qh = x[i].qh;
    int8_t* a = aux8;
    for (int j = 0; j < kQK_K; j += 128, a += 128, q4 += 64, qh += 32) {
      for (int l = 0; l < 32; ++l) {
        a[l + 0] = static_cast<int8_t>(((q4[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
        a[l + 32] = static_cast<int8_t>(((q4[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
        a[l + 64] = static_cast<int8_t>(((q4[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
        a[l + 96] = static_cast<int8_t>(((q4[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
      }
    }
    int32_t aux32[8] = {};
    for (int g = 0; g < 16; ++g) AccumulateLanes(aux32, x[i].scales[g], y[i].qs + 16 * g, aux8 + 16 * g, 16);
    const float d = Fp16ToFp32(x[i].d) * y[i].d;
    for (int l = 0; l < 8; ++l) sums[l] += d * static_cast<float>(aux32[l]);
  }
  float sumf = 0;
  for (int l = 0; l < 8; ++l) sumf += sums[l];
  return sumf;
}

}  // namespace rw::gguf
