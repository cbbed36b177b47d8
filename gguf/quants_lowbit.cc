// Low-bit formats: integer decoders of Q2_K, Q3_K, TQ1_0, TQ2_0, IQ4_XS, IQ4_NL, MXFP4 (the grid formats are in
// quants_iq.cc), dequantisation for all of them and the scalar twin of their AVX2 dot products. The float
// expressions of the dequantisation are llama.cpp v0.5.0's dequantize_row_* (ggml-quants.c), evaluated on the
// integer form, so the results are the same bits.
#include "gguf/quants_lowbit.h"

#include <cmath>
#include <cstring>

#include "base/check.h"
#include "gguf/quant_grids.h"
#include "gguf/quants_iq.h"

namespace rw::gguf {
namespace {

using TT = TensorType;

void DecodeQ2_K(const BlockQ2_K* x, DecodedK* out) {
  out->d = Fp16ToFp32(x->d);
  out->dmin = Fp16ToFp32(x->dmin);
  for (int g = 0; g < 16; ++g) {
    out->sc[g] = static_cast<int16_t>(x->scales[g] & 0xF);
    out->mins[g] = static_cast<int16_t>(x->scales[g] >> 4);
  }
  // Chunk c = 4 n + j of 32 elements: bits 2j..2j+1 of qs[32 n .. 32 n + 31].
  for (int c = 0; c < 8; ++c) {
    const uint8_t* qs = x->qs + 32 * (c / 4);
    for (int b = 0; b < 32; ++b) out->q[32 * c + b] = static_cast<int8_t>((qs[b] >> (2 * (c % 4))) & 3);
  }
}

void DecodeQ3_K(const BlockQ3_K* x, DecodedK* out) {
  ClearMins(out);
  out->d = Fp16ToFp32(x->d);
  // 16 six-bit scales: low 4 bits from bytes 0-7 (nibbles), high 2 bits from bytes 8-11.
  for (int g = 0; g < 16; ++g) {
    const int lo = (x->scales[g % 8] >> (4 * (g / 8))) & 0xF;
    const int hi = (x->scales[8 + g % 4] >> (2 * (g / 4))) & 3;
    out->sc[g] = static_cast<int16_t>((lo | (hi << 4)) - 32);
  }
  for (int c = 0; c < 8; ++c) {
    const uint8_t* qs = x->qs + 32 * (c / 4);
    for (int b = 0; b < 32; ++b) {
      const int low = (qs[b] >> (2 * (c % 4))) & 3;
      out->q[32 * c + b] = static_cast<int8_t>(low - ((x->hmask[b] >> c) & 1 ? 0 : 4));
    }
  }
}

// Base-3 digit n (0 = most significant) of a byte holding 5 (or 4) trits scaled to 0..255, minus 1.
inline int8_t Trit(uint8_t byte, int n) {
  static constexpr uint8_t kPow3[5] = {1, 3, 9, 27, 81};
  const uint8_t q = static_cast<uint8_t>(byte * kPow3[n]);
  return static_cast<int8_t>(((static_cast<uint16_t>(q) * 3) >> 8) - 1);
}

void DecodeTQ1_0(const BlockTQ1_0* x, DecodedK* out) {
  ClearMins(out);
  out->d = Fp16ToFp32(x->d);
  for (int g = 0; g < 16; ++g) out->sc[g] = 1;
  int8_t* q = out->q;
  for (int n = 0; n < 5; ++n)
    for (int m = 0; m < 32; ++m) *q++ = Trit(x->qs[m], n);
  for (int n = 0; n < 5; ++n)
    for (int m = 0; m < 16; ++m) *q++ = Trit(x->qs[32 + m], n);
  for (int n = 0; n < 4; ++n)
    for (int j = 0; j < 4; ++j) *q++ = Trit(x->qh[j], n);
}

void DecodeTQ2_0(const BlockTQ2_0* x, DecodedK* out) {
  ClearMins(out);
  out->d = Fp16ToFp32(x->d);
  for (int g = 0; g < 16; ++g) out->sc[g] = 1;
  for (int c = 0; c < 8; ++c) {
    const uint8_t* qs = x->qs + 32 * (c / 4);
    for (int b = 0; b < 32; ++b) out->q[32 * c + b] = static_cast<int8_t>(((qs[b] >> (2 * (c % 4))) & 3) - 1);
  }
}

// 16 bytes of 4-bit indices into `values`: low nibbles are elements 0-15, high nibbles 16-31.
void LookupNibbles(const uint8_t* qs, const int8_t* values, int8_t* q) {
  for (int j = 0; j < 16; ++j) {
    q[j] = values[qs[j] & 0xF];
    q[j + 16] = values[qs[j] >> 4];
  }
}

void DecodeIQ4_XS(const BlockIQ4_XS* x, DecodedK* out) {
  ClearMins(out);
  out->d = Fp16ToFp32(x->d);
  for (int ib = 0; ib < 8; ++ib) {
    const int ls = ((x->scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((x->scales_h >> (2 * ib)) & 3) << 4);
    out->sc[2 * ib] = out->sc[2 * ib + 1] = static_cast<int16_t>(ls - 32);
    LookupNibbles(x->qs + 16 * ib, grids::kIq4nlValues, out->q + 32 * ib);
  }
}

// The float scale of group g as llama.cpp's dequantize_row_* computes it from the block's d and integer scale.
float GroupScale(TT t, float d, int sc) {
  switch (t) {
    case TT::kIQ2_XXS: case TT::kIQ2_XS: case TT::kIQ2_S:
      return d * (0.5f + static_cast<float>((sc - 1) / 2)) * 0.25f;
    case TT::kIQ3_XXS: return d * (0.5f + static_cast<float>((sc - 1) / 2)) * 0.5f;
    default: return d * static_cast<float>(sc);
  }
}

size_t LowbitBlockBytes(TT t) {
  switch (t) {
    case TT::kQ2_K: return sizeof(BlockQ2_K);
    case TT::kQ3_K: return sizeof(BlockQ3_K);
    case TT::kTQ1_0: return sizeof(BlockTQ1_0);
    case TT::kTQ2_0: return sizeof(BlockTQ2_0);
    case TT::kIQ2_XXS: return sizeof(BlockIQ2_XXS);
    case TT::kIQ2_XS: return sizeof(BlockIQ2_XS);
    case TT::kIQ2_S: return sizeof(BlockIQ2_S);
    case TT::kIQ3_XXS: return sizeof(BlockIQ3_XXS);
    case TT::kIQ3_S: return sizeof(BlockIQ3_S);
    case TT::kIQ1_S: return sizeof(BlockIQ1_S);
    case TT::kIQ1_M: return sizeof(BlockIQ1_M);
    case TT::kIQ4_XS: return sizeof(BlockIQ4_XS);
    case TT::kIQ4_NL: return sizeof(BlockIQ4_NL);
    case TT::kMXFP4: return sizeof(BlockMXFP4);
    default: break;
  }
  REWIND_CHECK_MSG(false, "not a low-bit type: %s", TypeName(t));
  return 0;
}

// Fixed-order horizontal sum of 8 lanes (avx2_blocks::Hsum): (l + l+4), then (0+2, 1+3), then (0 + 1).
float Hsum8(const float* v) {
  const float s0 = v[0] + v[4], s1 = v[1] + v[5], s2 = v[2] + v[6], s3 = v[3] + v[7];
  return (s0 + s2) + (s1 + s3);
}

}  // namespace

bool IsLowbitKType(TT t) {
  switch (t) {
    case TT::kQ2_K: case TT::kQ3_K: case TT::kTQ1_0: case TT::kTQ2_0: case TT::kIQ2_XXS: case TT::kIQ2_XS:
    case TT::kIQ2_S: case TT::kIQ3_XXS: case TT::kIQ3_S: case TT::kIQ1_S: case TT::kIQ1_M: case TT::kIQ4_XS:
      return true;
    default: return false;
  }
}

bool IsLowbitType(TT t) { return IsLowbitKType(t) || t == TT::kIQ4_NL || t == TT::kMXFP4; }

float DotFactorK(TT t) {
  switch (t) {
    case TT::kIQ1_S: case TT::kIQ1_M: case TT::kIQ2_XXS: case TT::kIQ2_XS: case TT::kIQ2_S: return 0.125f;
    case TT::kIQ3_XXS: return 0.25f;
    default: return 1.0f;
  }
}

void DecodeK(TT t, const void* block, DecodedK* out) {
  switch (t) {
    case TT::kQ2_K: return DecodeQ2_K(static_cast<const BlockQ2_K*>(block), out);
    case TT::kQ3_K: return DecodeQ3_K(static_cast<const BlockQ3_K*>(block), out);
    case TT::kTQ1_0: return DecodeTQ1_0(static_cast<const BlockTQ1_0*>(block), out);
    case TT::kTQ2_0: return DecodeTQ2_0(static_cast<const BlockTQ2_0*>(block), out);
    case TT::kIQ4_XS: return DecodeIQ4_XS(static_cast<const BlockIQ4_XS*>(block), out);
    case TT::kIQ2_XXS: return DecodeIQ2_XXS(static_cast<const BlockIQ2_XXS*>(block), out);
    case TT::kIQ2_XS: return DecodeIQ2_XS(static_cast<const BlockIQ2_XS*>(block), out);
    case TT::kIQ2_S: return DecodeIQ2_S(static_cast<const BlockIQ2_S*>(block), out);
    case TT::kIQ3_XXS: return DecodeIQ3_XXS(static_cast<const BlockIQ3_XXS*>(block), out);
    case TT::kIQ3_S: return DecodeIQ3_S(static_cast<const BlockIQ3_S*>(block), out);
    case TT::kIQ1_S: return DecodeIQ1_S(static_cast<const BlockIQ1_S*>(block), out);
    case TT::kIQ1_M: return DecodeIQ1_M(static_cast<const BlockIQ1_M*>(block), out);
    default: break;
  }
  REWIND_CHECK_MSG(false, "DecodeK: not a 256-element low-bit type: %s", TypeName(t));
}

float E8M0Half(uint8_t e) {
  const uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

void Decode32(TT t, const void* block, Decoded32* out) {
  if (t == TT::kIQ4_NL) {
    const auto* x = static_cast<const BlockIQ4_NL*>(block);
    out->d = Fp16ToFp32(x->d);
    LookupNibbles(x->qs, grids::kIq4nlValues, out->q);
    return;
  }
  REWIND_CHECK_MSG(t == TT::kMXFP4, "Decode32: not a 32-element low-bit type: %s", TypeName(t));
  const auto* x = static_cast<const BlockMXFP4*>(block);
  out->d = E8M0Half(x->e);
  LookupNibbles(x->qs, grids::kFp4Values, out->q);
}

void DequantLowbit(TT t, const void* src, float* dst, int64_t nb) {
  const auto* p = static_cast<const uint8_t*>(src);
  const size_t bytes = LowbitBlockBytes(t);
  if (!IsLowbitKType(t)) {
    Decoded32 dec;
    for (int64_t i = 0; i < nb; ++i, dst += 32) {
      Decode32(t, p + i * bytes, &dec);
      for (int j = 0; j < 32; ++j) dst[j] = dec.d * static_cast<float>(dec.q[j]);
    }
    return;
  }
  const bool iq1 = t == TT::kIQ1_S || t == TT::kIQ1_M;
  DecodedK dec;
  for (int64_t i = 0; i < nb; ++i, dst += 256) {
    DecodeK(t, p + i * bytes, &dec);
    for (int g = 0; g < 16; ++g) {
      const float dl = GroupScale(t, dec.d, dec.sc[g]);
      const float ml = dec.dmin * static_cast<float>(dec.mins[g]);
      for (int j = 16 * g; j < 16 * g + 16; ++j) {
        if (t == TT::kQ2_K) {
          dst[j] = dl * static_cast<float>(dec.q[j]) - ml;
        } else if (iq1) {  // dl * (grid + delta) with grid + delta = q / 8 (exact)
          dst[j] = dl * (static_cast<float>(dec.q[j]) * 0.125f);
        } else {
          dst[j] = dl * static_cast<float>(dec.q[j]);
        }
      }
    }
  }
}

float DotLowbitRef(TT t, const void* w, const void* act, int64_t nb) {
  const auto* p = static_cast<const uint8_t*>(w);
  const size_t bytes = LowbitBlockBytes(t);
  float acc[8] = {};
  if (!IsLowbitKType(t)) {
    const auto* a = static_cast<const BlockQ8_0*>(act);
    Decoded32 dec;
    for (int64_t i = 0; i < nb; ++i) {
      Decode32(t, p + i * bytes, &dec);
      const float dd = dec.d * Fp16ToFp32(a[i].d);
      for (int l = 0; l < 8; ++l) {
        int32_t s = 0;
        for (int b = 4 * l; b < 4 * l + 4; ++b) s += dec.q[b] * a[i].qs[b];
        acc[l] = std::fma(dd, static_cast<float>(s), acc[l]);
      }
    }
    return Hsum8(acc);
  }
  const auto* a = static_cast<const BlockQ8_K*>(act);
  const float factor = DotFactorK(t);
  DecodedK dec;
  for (int64_t i = 0; i < nb; ++i) {
    DecodeK(t, p + i * bytes, &dec);
    int32_t sumi[8] = {};
    for (int c = 0; c < 8; ++c) {
      for (int l = 0; l < 8; ++l) {
        int32_t s = 0;
        for (int b = 32 * c + 4 * l; b < 32 * c + 4 * l + 4; ++b) s += dec.q[b] * a[i].qs[b];
        sumi[l] += dec.sc[2 * c + l / 4] * s;
      }
    }
    const float dd = (dec.d * factor) * a[i].d;
    for (int l = 0; l < 8; ++l) acc[l] = std::fma(dd, static_cast<float>(sumi[l]), acc[l]);
    if (t == TT::kQ2_K) {
      const float dm = dec.dmin * a[i].d;
      for (int l = 0; l < 8; ++l) {
        const int32_t m = a[i].bsums[2 * l] * dec.mins[2 * l] + a[i].bsums[2 * l + 1] * dec.mins[2 * l + 1];
        acc[l] = std::fma(-dm, static_cast<float>(m), acc[l]);
      }
    }
  }
  return Hsum8(acc);
}

}  // namespace rw::gguf
