// fp16/bf16 conversion, the 32-element block formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1) and dispatch.
// K formats live in quants_k.cc. Spec: ../shared/spec/gguf-and-quants.md sections 3, 4.
#include "gguf/quants.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/check.h"
#include "gguf/quants_k.h"
#include "gguf/quants_lowbit.h"

namespace rw::gguf {

// ---- fp16 / bf16 ------------------------------------------------------------------------------------------

static inline uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
static inline float BitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

float Fp16ToFp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1F;
  const uint32_t mant = h & 0x3FF;
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24 is exact in float.
    const float v = static_cast<float>(mant) * 0x1p-24f;
    return BitsFloat(FloatBits(v) | sign);
  }
  if (exp == 31) {  // inf; NaN is quietened with its payload kept (as x86 F16C does)
    return BitsFloat(sign | 0x7F800000u | (mant << 13) | (mant ? 0x400000u : 0));
  }
  return BitsFloat(sign | ((exp + 112) << 23) | (mant << 13));
}

uint16_t Fp32ToFp16(float f) {
  uint32_t x = FloatBits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  x &= 0x7FFFFFFFu;
  if (x > 0x7F800000u) return sign | 0x7E00 | static_cast<uint16_t>((x & 0x7FFFFF) >> 13);  // quiet NaN
  if (x >= 0x477FF000u) return sign | 0x7C00;  // >= 65520 rounds to inf (and inf itself)
  const uint32_t e = x >> 23;
  if (e < 113) {
    // Result is subnormal (or zero): value * 2^24 rounded to nearest even, in [0, 1024].
    const uint32_t m = (x & 0x7FFFFF) | (e ? 0x800000u : 0);
    const uint32_t shift = 126 - e + (e ? 0 : 1);  // float subnormals have exponent 1 - 127
    if (shift > 24) return sign;
    uint32_t r = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1))) ++r;
    return sign | static_cast<uint16_t>(r);
  }
  uint32_t h = ((e - 112) << 10) | ((x & 0x7FFFFF) >> 13);
  const uint32_t rem = x & 0x1FFF;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) ++h;  // a carry into the exponent is correct
  return sign | static_cast<uint16_t>(h);
}

float Bf16ToFp32(uint16_t h) { return BitsFloat(static_cast<uint32_t>(h) << 16); }

uint16_t Fp32ToBf16(float f) {
  const uint32_t u = FloatBits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  return static_cast<uint16_t>((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
}

void Fp16ToFp32Row(const uint16_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = Fp16ToFp32(src[i]);
}
void Fp32ToFp16Row(const float* src, uint16_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = Fp32ToFp16(src[i]);
}
void Bf16ToFp32Row(const uint16_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = Bf16ToFp32(src[i]);
}
void Fp32ToBf16Row(const float* src, uint16_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = Fp32ToBf16(src[i]);
}

// ---- Types ------------------------------------------------------------------------------------------------

bool IsSupportedWeightType(TensorType t) {
  switch (t) {
    case TensorType::kF32: case TensorType::kF16: case TensorType::kBF16: case TensorType::kQ8_0:
    case TensorType::kQ4_0: case TensorType::kQ4_1: case TensorType::kQ5_0: case TensorType::kQ5_1:
    case TensorType::kQ4_K: case TensorType::kQ5_K: case TensorType::kQ6_K:
      return true;
    default:
      return IsLowbitType(t);
  }
}

bool IsQuantizableType(TensorType t) {
  return (IsSupportedWeightType(t) && !IsLowbitType(t)) || t == TensorType::kQ8_1 || t == TensorType::kQ8_K;
}

TensorType VecDotType(TensorType weight) {
  switch (weight) {
    case TensorType::kF32: return TensorType::kF32;
    case TensorType::kF16: return TensorType::kF16;
    case TensorType::kBF16: return TensorType::kBF16;
    case TensorType::kQ4_0: case TensorType::kQ5_0: case TensorType::kQ8_0: return TensorType::kQ8_0;
    case TensorType::kQ4_1: case TensorType::kQ5_1: return TensorType::kQ8_1;
    case TensorType::kQ4_K: case TensorType::kQ5_K: case TensorType::kQ6_K: return TensorType::kQ8_K;
    case TensorType::kIQ4_NL: case TensorType::kMXFP4: return TensorType::kQ8_0;
    default:
      if (IsLowbitKType(weight)) return TensorType::kQ8_K;
      break;
  }
  REWIND_CHECK_MSG(false, "no vec_dot type for tensor type %u", static_cast<unsigned>(weight));
  return TensorType::kF32;
}

static int64_t BlockBytes(TensorType t) {
  switch (t) {
    case TensorType::kF32: return 4;
    case TensorType::kF16: case TensorType::kBF16: return 2;
    case TensorType::kQ4_0: return sizeof(BlockQ4_0);
    case TensorType::kQ4_1: return sizeof(BlockQ4_1);
    case TensorType::kQ5_0: return sizeof(BlockQ5_0);
    case TensorType::kQ5_1: return sizeof(BlockQ5_1);
    case TensorType::kQ8_0: return sizeof(BlockQ8_0);
    case TensorType::kQ8_1: return sizeof(BlockQ8_1);
    case TensorType::kQ4_K: return sizeof(BlockQ4_K);
    case TensorType::kQ5_K: return sizeof(BlockQ5_K);
    case TensorType::kQ6_K: return sizeof(BlockQ6_K);
    case TensorType::kQ8_K: return sizeof(BlockQ8_K);
    default: return IsLowbitType(t) ? GetTypeInfo(t)->block_bytes : 0;
  }
}

int64_t BlockSize(TensorType t) {
  switch (t) {
    case TensorType::kF32: case TensorType::kF16: case TensorType::kBF16: return 1;
    case TensorType::kQ4_0: case TensorType::kQ4_1: case TensorType::kQ5_0: case TensorType::kQ5_1:
    case TensorType::kQ8_0: case TensorType::kQ8_1: return kQK;
    case TensorType::kQ4_K: case TensorType::kQ5_K: case TensorType::kQ6_K: case TensorType::kQ8_K: return kQK_K;
    default:
      if (IsLowbitType(t)) return GetTypeInfo(t)->block_size;
      break;
  }
  REWIND_CHECK_MSG(false, "unsupported tensor type %u", static_cast<unsigned>(t));
  return 1;
}

static int64_t NumBlocks(TensorType t, int64_t n) {
  const int64_t bs = BlockSize(t);
  REWIND_CHECK_MSG(n >= 0 && n % bs == 0, "row of %lld elements is not a multiple of block size %lld",
                   static_cast<long long>(n), static_cast<long long>(bs));
  return n / bs;
}

size_t RowBytes(TensorType t, int64_t n) { return static_cast<size_t>(NumBlocks(t, n) * BlockBytes(t)); }

// ---- 32-element formats: dequantisation -------------------------------------------------------------------

static void DequantQ4_0(const BlockQ4_0* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = Fp16ToFp32(x[i].d);
    for (int j = 0; j < 16; ++j) {
      y[j] = ((x[i].qs[j] & 0x0F) - 8) * d;
      y[j + 16] = ((x[i].qs[j] >> 4) - 8) * d;
    }
  }
}

static void DequantQ4_1(const BlockQ4_1* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = Fp16ToFp32(x[i].d), m = Fp16ToFp32(x[i].m);
    for (int j = 0; j < 16; ++j) {
      y[j] = (x[i].qs[j] & 0x0F) * d + m;
      y[j + 16] = (x[i].qs[j] >> 4) * d + m;
    }
  }
}

static inline uint32_t LoadU32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// 5-bit quants of element j and j+16 of a Q5 block.
static inline void Q5Pair(const uint8_t* qs, uint32_t qh, int j, int* lo, int* hi) {
  *lo = (qs[j] & 0x0F) | (((qh >> j) & 1) << 4);
  *hi = (qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
}

static void DequantQ5_0(const BlockQ5_0* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = Fp16ToFp32(x[i].d);
    const uint32_t qh = LoadU32(x[i].qh);
    for (int j = 0; j < 16; ++j) {
      int lo, hi;
      Q5Pair(x[i].qs, qh, j, &lo, &hi);
      y[j] = (lo - 16) * d;
      y[j + 16] = (hi - 16) * d;
    }
  }
}

static void DequantQ5_1(const BlockQ5_1* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = Fp16ToFp32(x[i].d), m = Fp16ToFp32(x[i].m);
    const uint32_t qh = LoadU32(x[i].qh);
    for (int j = 0; j < 16; ++j) {
      int lo, hi;
      Q5Pair(x[i].qs, qh, j, &lo, &hi);
      y[j] = lo * d + m;
      y[j + 16] = hi * d + m;
    }
  }
}

static void DequantQ8_0(const BlockQ8_0* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = Fp16ToFp32(x[i].d);
    for (int j = 0; j < kQK; ++j) y[j] = x[i].qs[j] * d;
  }
}

static void DequantQ8_1(const BlockQ8_1* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = Fp16ToFp32(x[i].d);
    for (int j = 0; j < kQK; ++j) y[j] = x[i].qs[j] * d;
  }
}

// ---- 32-element formats: reference quantisers (llama.cpp quantize_row_*_ref) ------------------------------

// Float -> int8 conversion by truncation that never invokes UB (NaN and out-of-range give 0 / clamp).
static inline int TruncToInt(float v, int lo, int hi) {
  if (!(v == v)) return 0;
  if (v <= static_cast<float>(lo)) return lo;
  if (v >= static_cast<float>(hi)) return hi;
  return static_cast<int>(v);
}
static inline int RoundAway(float v) {  // roundf, clamped to int8
  return TruncToInt(std::round(v), -128, 127);
}
// Round half to even for |v| < 2^22 without a libm call (the 1.5 * 2^23 trick; IEEE default rounding, no
// fast-math). Clamped to int8; NaN gives an arbitrary in-range value, never UB.
static inline int RoundEvenInt8(float v) {
  const float r = (v + 12582912.f) - 12582912.f;
  return TruncToInt(r, -128, 127);
}

static void QuantQ4_0(const float* x, BlockQ4_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < kQK; ++j) {
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -8;
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = Fp32ToFp16(d);
    for (int j = 0; j < 16; ++j) {
      const int q0 = std::min(15, TruncToInt(x[j] * id + 8.5f, -128, 127));
      const int q1 = std::min(15, TruncToInt(x[j + 16] * id + 8.5f, -128, 127));
      y[i].qs[j] = static_cast<uint8_t>((q0 & 0x0F) | (q1 << 4));
    }
  }
}

static void QuantQ4_1(const float* x, BlockQ4_1* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    float min = 3.402823466e+38f, max = -3.402823466e+38f;
    for (int j = 0; j < kQK; ++j) {
      if (x[j] < min) min = x[j];
      if (x[j] > max) max = x[j];
    }
    const float d = (max - min) / 15;
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = Fp32ToFp16(d);
    y[i].m = Fp32ToFp16(min);
    for (int j = 0; j < 16; ++j) {
      const int q0 = std::min(15, TruncToInt((x[j] - min) * id + 0.5f, 0, 127));
      const int q1 = std::min(15, TruncToInt((x[j + 16] - min) * id + 0.5f, 0, 127));
      y[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

static void QuantQ5_0(const float* x, BlockQ5_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < kQK; ++j) {
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -16;
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = Fp32ToFp16(d);
    uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) {
      const int q0 = std::min(31, TruncToInt(x[j] * id + 16.5f, 0, 127));
      const int q1 = std::min(31, TruncToInt(x[j + 16] * id + 16.5f, 0, 127));
      y[i].qs[j] = static_cast<uint8_t>((q0 & 0x0F) | ((q1 & 0x0F) << 4));
      qh |= static_cast<uint32_t>((q0 & 0x10) >> 4) << j;
      qh |= static_cast<uint32_t>((q1 & 0x10) >> 4) << (j + 16);
    }
    std::memcpy(y[i].qh, &qh, 4);
  }
}

static void QuantQ5_1(const float* x, BlockQ5_1* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    float min = 3.402823466e+38f, max = -3.402823466e+38f;
    for (int j = 0; j < kQK; ++j) {
      if (x[j] < min) min = x[j];
      if (x[j] > max) max = x[j];
    }
    const float d = (max - min) / 31;
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = Fp32ToFp16(d);
    y[i].m = Fp32ToFp16(min);
    uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) {
      const int q0 = std::min(31, TruncToInt((x[j] - min) * id + 0.5f, 0, 127));
      const int q1 = std::min(31, TruncToInt((x[j + 16] - min) * id + 0.5f, 0, 127));
      y[i].qs[j] = static_cast<uint8_t>((q0 & 0x0F) | ((q1 & 0x0F) << 4));
      qh |= static_cast<uint32_t>((q0 & 0x10) >> 4) << j;
      qh |= static_cast<uint32_t>((q1 & 0x10) >> 4) << (j + 16);
    }
    std::memcpy(y[i].qh, &qh, 4);
  }
}

static void QuantQ8_0(const float* x, BlockQ8_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127;
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = Fp32ToFp16(d);
    for (int j = 0; j < kQK; ++j) y[i].qs[j] = static_cast<int8_t>(RoundAway(x[j] * id));
  }
}

static void QuantQ8_1(const float* x, BlockQ8_1* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127;
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = Fp32ToFp16(d);
    int sum = 0;
    for (int j = 0; j < 16; ++j) {
      y[i].qs[j] = static_cast<int8_t>(RoundAway(x[j] * id));
      y[i].qs[j + 16] = static_cast<int8_t>(RoundAway(x[j + 16] * id));
      sum += y[i].qs[j] + y[i].qs[j + 16];
    }
    y[i].s = Fp32ToFp16(static_cast<float>(sum) * d);
  }
}

// llama.cpp's CPU backend on x86 (AVX2 build) quantises activations with its own SIMD variant, not the _ref
// function: id = 127/amax and round half to even (ggml-cpu/arch/x86/quants.c quantize_row_q8_0/q8_1).
static void QuantQ8_0Cpu(const float* x, BlockQ8_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float id = amax != 0.0f ? 127.f / amax : 0.0f;
    y[i].d = Fp32ToFp16(amax / 127.f);
    for (int j = 0; j < kQK; ++j) y[i].qs[j] = static_cast<int8_t>(RoundEvenInt8(x[j] * id));
  }
}

static void QuantQ8_1Cpu(const float* x, BlockQ8_1* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.f;
    const float id = amax != 0.0f ? 127.f / amax : 0.0f;
    y[i].d = Fp32ToFp16(d);
    int sum = 0;
    for (int j = 0; j < kQK; ++j) {
      y[i].qs[j] = static_cast<int8_t>(RoundEvenInt8(x[j] * id));
      sum += y[i].qs[j];
    }
    y[i].s = Fp32ToFp16(d * static_cast<float>(sum));
  }
}

// ---- 32-element formats: reference dot products (llama.cpp ggml_vec_dot_*_generic) -------------------------

static float DotQ8_0(const BlockQ8_0* x, const BlockQ8_0* y, int64_t nb) {
  float sumf = 0;
  for (int64_t i = 0; i < nb; ++i) {
    int sumi = 0;
    for (int j = 0; j < kQK; ++j) sumi += x[i].qs[j] * y[i].qs[j];
    sumf += static_cast<float>(sumi) * (Fp16ToFp32(x[i].d) * Fp16ToFp32(y[i].d));
  }
  return sumf;
}

static float DotQ4_0(const BlockQ4_0* x, const BlockQ8_0* y, int64_t nb) {
  float sumf = 0;
  for (int64_t i = 0; i < nb; ++i) {
    int sumi = 0;
    for (int j = 0; j < 16; ++j) {
      sumi += ((x[i].qs[j] & 0x0F) - 8) * y[i].qs[j];
      sumi += ((x[i].qs[j] >> 4) - 8) * y[i].qs[j + 16];
    }
    sumf += static_cast<float>(sumi) * Fp16ToFp32(x[i].d) * Fp16ToFp32(y[i].d);
  }
  return sumf;
}

static float DotQ4_1(const BlockQ4_1* x, const BlockQ8_1* y, int64_t nb) {
  float sumf = 0;
  for (int64_t i = 0; i < nb; ++i) {
    int sumi = 0;
    for (int j = 0; j < 16; ++j) {
      sumi += (x[i].qs[j] & 0x0F) * y[i].qs[j];
      sumi += (x[i].qs[j] >> 4) * y[i].qs[j + 16];
    }
    sumf += (Fp16ToFp32(x[i].d) * Fp16ToFp32(y[i].d)) * static_cast<float>(sumi) +
            Fp16ToFp32(x[i].m) * Fp16ToFp32(y[i].s);
  }
  return sumf;
}

static float DotQ5_0(const BlockQ5_0* x, const BlockQ8_0* y, int64_t nb) {
  float sumf = 0;
  for (int64_t i = 0; i < nb; ++i) {
    const uint32_t qh = LoadU32(x[i].qh);
    int sumi = 0;
    for (int j = 0; j < 16; ++j) {
      int lo, hi;
      Q5Pair(x[i].qs, qh, j, &lo, &hi);
      sumi += (lo - 16) * y[i].qs[j] + (hi - 16) * y[i].qs[j + 16];
    }
    sumf += (Fp16ToFp32(x[i].d) * Fp16ToFp32(y[i].d)) * static_cast<float>(sumi);
  }
  return sumf;
}

static float DotQ5_1(const BlockQ5_1* x, const BlockQ8_1* y, int64_t nb) {
  float sumf = 0;
  for (int64_t i = 0; i < nb; ++i) {
    const uint32_t qh = LoadU32(x[i].qh);
    int sumi = 0;
    for (int j = 0; j < 16; ++j) {
      int lo, hi;
      Q5Pair(x[i].qs, qh, j, &lo, &hi);
      sumi += lo * y[i].qs[j] + hi * y[i].qs[j + 16];
    }
    sumf += (Fp16ToFp32(x[i].d) * Fp16ToFp32(y[i].d)) * static_cast<float>(sumi) +
            Fp16ToFp32(x[i].m) * Fp16ToFp32(y[i].s);
  }
  return sumf;
}

// F16/BF16/F32: float products accumulated in double (ggml_vec_dot_{f16,bf16,f32} without SIMD).
static float DotF16(const uint16_t* x, const uint16_t* y, int64_t n) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(Fp16ToFp32(x[i]) * Fp16ToFp32(y[i]));
  return static_cast<float>(sum);
}
static float DotBF16(const uint16_t* x, const uint16_t* y, int64_t n) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(Bf16ToFp32(x[i]) * Bf16ToFp32(y[i]));
  return static_cast<float>(sum);
}
static float DotF32(const float* x, const float* y, int64_t n) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * y[i]);
  return static_cast<float>(sum);
}

// ---- Dispatch ---------------------------------------------------------------------------------------------

void DequantizeRow(TensorType t, const void* src, float* dst, int64_t n) {
  const int64_t nb = NumBlocks(t, n);
  if (n == 0) return;
  switch (t) {
    case TensorType::kF32: std::memcpy(dst, src, n * sizeof(float)); return;
    case TensorType::kF16: Fp16ToFp32Row(static_cast<const uint16_t*>(src), dst, n); return;
    case TensorType::kBF16: Bf16ToFp32Row(static_cast<const uint16_t*>(src), dst, n); return;
    case TensorType::kQ4_0: DequantQ4_0(static_cast<const BlockQ4_0*>(src), dst, nb); return;
    case TensorType::kQ4_1: DequantQ4_1(static_cast<const BlockQ4_1*>(src), dst, nb); return;
    case TensorType::kQ5_0: DequantQ5_0(static_cast<const BlockQ5_0*>(src), dst, nb); return;
    case TensorType::kQ5_1: DequantQ5_1(static_cast<const BlockQ5_1*>(src), dst, nb); return;
    case TensorType::kQ8_0: DequantQ8_0(static_cast<const BlockQ8_0*>(src), dst, nb); return;
    case TensorType::kQ8_1: DequantQ8_1(static_cast<const BlockQ8_1*>(src), dst, nb); return;
    case TensorType::kQ4_K: DequantQ4_K(static_cast<const BlockQ4_K*>(src), dst, nb); return;
    case TensorType::kQ5_K: DequantQ5_K(static_cast<const BlockQ5_K*>(src), dst, nb); return;
    case TensorType::kQ6_K: DequantQ6_K(static_cast<const BlockQ6_K*>(src), dst, nb); return;
    case TensorType::kQ8_K: DequantQ8_K(static_cast<const BlockQ8_K*>(src), dst, nb); return;
    default:
      if (IsLowbitType(t)) return DequantLowbit(t, src, dst, nb);
      break;
  }
  REWIND_CHECK_MSG(false, "DequantizeRow: unsupported type %u", static_cast<unsigned>(t));
}

void QuantizeRow(TensorType t, const float* src, void* dst, int64_t n) {
  const int64_t nb = NumBlocks(t, n);
  if (n == 0) return;
  switch (t) {
    case TensorType::kF32: std::memcpy(dst, src, n * sizeof(float)); return;
    case TensorType::kF16: Fp32ToFp16Row(src, static_cast<uint16_t*>(dst), n); return;
    case TensorType::kBF16: Fp32ToBf16Row(src, static_cast<uint16_t*>(dst), n); return;
    case TensorType::kQ4_0: QuantQ4_0(src, static_cast<BlockQ4_0*>(dst), nb); return;
    case TensorType::kQ4_1: QuantQ4_1(src, static_cast<BlockQ4_1*>(dst), nb); return;
    case TensorType::kQ5_0: QuantQ5_0(src, static_cast<BlockQ5_0*>(dst), nb); return;
    case TensorType::kQ5_1: QuantQ5_1(src, static_cast<BlockQ5_1*>(dst), nb); return;
    case TensorType::kQ8_0: QuantQ8_0(src, static_cast<BlockQ8_0*>(dst), nb); return;
    case TensorType::kQ8_1: QuantQ8_1(src, static_cast<BlockQ8_1*>(dst), nb); return;
    case TensorType::kQ4_K: QuantQ4_K(src, static_cast<BlockQ4_K*>(dst), nb); return;
    case TensorType::kQ5_K: QuantQ5_K(src, static_cast<BlockQ5_K*>(dst), nb); return;
    case TensorType::kQ6_K: QuantQ6_K(src, static_cast<BlockQ6_K*>(dst), nb); return;
    case TensorType::kQ8_K: QuantQ8_K(src, static_cast<BlockQ8_K*>(dst), nb); return;
    default: break;
  }
  REWIND_CHECK_MSG(false, "QuantizeRow: unsupported type %u", static_cast<unsigned>(t));
}

void QuantizeActivationRow(TensorType t, const float* src, void* dst, int64_t n) {
  const int64_t nb = NumBlocks(t, n);
  if (n == 0) return;
  switch (t) {
    case TensorType::kQ8_0: QuantQ8_0Cpu(src, static_cast<BlockQ8_0*>(dst), nb); return;
    case TensorType::kQ8_1: QuantQ8_1Cpu(src, static_cast<BlockQ8_1*>(dst), nb); return;
    default: QuantizeRow(t, src, dst, n); return;
  }
}

float VecDotRef(TensorType t, int64_t n, const void* w, const void* a) {
  const int64_t nb = NumBlocks(t, n);
  switch (t) {
    case TensorType::kF32: return DotF32(static_cast<const float*>(w), static_cast<const float*>(a), n);
    case TensorType::kF16: return DotF16(static_cast<const uint16_t*>(w), static_cast<const uint16_t*>(a), n);
    case TensorType::kBF16: return DotBF16(static_cast<const uint16_t*>(w), static_cast<const uint16_t*>(a), n);
    case TensorType::kQ8_0:
      return DotQ8_0(static_cast<const BlockQ8_0*>(w), static_cast<const BlockQ8_0*>(a), nb);
    case TensorType::kQ4_0:
      return DotQ4_0(static_cast<const BlockQ4_0*>(w), static_cast<const BlockQ8_0*>(a), nb);
    case TensorType::kQ4_1:
      return DotQ4_1(static_cast<const BlockQ4_1*>(w), static_cast<const BlockQ8_1*>(a), nb);
    case TensorType::kQ5_0:
      return DotQ5_0(static_cast<const BlockQ5_0*>(w), static_cast<const BlockQ8_0*>(a), nb);
    case TensorType::kQ5_1:
      return DotQ5_1(static_cast<const BlockQ5_1*>(w), static_cast<const BlockQ8_1*>(a), nb);
    case TensorType::kQ4_K:
      return DotQ4_K(static_cast<const BlockQ4_K*>(w), static_cast<const BlockQ8_K*>(a), nb);
    case TensorType::kQ5_K:
      return DotQ5_K(static_cast<const BlockQ5_K*>(w), static_cast<const BlockQ8_K*>(a), nb);
    case TensorType::kQ6_K:
      return DotQ6_K(static_cast<const BlockQ6_K*>(w), static_cast<const BlockQ8_K*>(a), nb);
    default:
      if (IsLowbitType(t)) return DotLowbitRef(t, w, a, nb);
      break;
  }
  REWIND_CHECK_MSG(false, "VecDotRef: unsupported weight type %u", static_cast<unsigned>(t));
  return 0;
}

}  // namespace rw::gguf
