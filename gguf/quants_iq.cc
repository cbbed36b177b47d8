// Integer decoders of the grid formats (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S), after llama.cpp
// v0.5.0's dequantize_row_iq* (ggml-quants.c). Grid entries are magnitudes (IQ2/IQ3) with separate sign bits, or
// values in {-1, 0, 1} plus a shift of +-1/8 (IQ1, stored here as 8 * value +- 1).
#include <cstring>

#include "gguf/quant_grids.h"
#include "gguf/quants_iq.h"

namespace rw::gguf {
namespace {

inline uint16_t U16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline uint32_t U32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// n grid magnitudes (bytes of `grid`), negated where bit j of `signs` is set, into q[0..n).
inline void SignedGrid(uint64_t grid, uint32_t signs, int n, int8_t* q) {
  for (int j = 0; j < n; ++j) {
    const int v = static_cast<int>((grid >> (8 * j)) & 0xFF);
    q[j] = static_cast<int8_t>((signs >> j) & 1 ? -v : v);
  }
}

// IQ1: grid values g in {-1, 0, 1} with the block's shift of +-1/8, as 8 * g +- 1.
inline void ShiftedGrid(uint64_t grid, bool minus, int8_t* q) {
  for (int j = 0; j < 8; ++j) {
    const int g = static_cast<int8_t>((grid >> (8 * j)) & 0xFF);
    q[j] = static_cast<int8_t>(8 * g + (minus ? -1 : 1));
  }
}

}  // namespace

void DecodeIQ2_XXS(const BlockIQ2_XXS* x, DecodedK* out) {
  ClearMins(out);
  out->d = Fp16ToFp32(x->d);
  for (int ib = 0; ib < 8; ++ib) {
    const uint32_t idx = U32(x->qs + 8 * ib), hi = U32(x->qs + 8 * ib + 4);
    out->sc[2 * ib] = out->sc[2 * ib + 1] = static_cast<int16_t>(2 * (hi >> 28) + 1);
    for (int l = 0; l < 4; ++l) {
      SignedGrid(grids::kIq2xxsGrid[(idx >> (8 * l)) & 0xFF], grids::SignsWithParity(hi >> (7 * l)), 8,
                 out->q + 32 * ib + 8 * l);
    }
  }
}

void DecodeIQ2_XS(const BlockIQ2_XS* x, DecodedK* out) {
  ClearMins(out);
  out->d = Fp16ToFp32(x->d);
  for (int ib = 0; ib < 8; ++ib) {
    out->sc[2 * ib] = static_cast<int16_t>(2 * (x->scales[ib] & 0xF) + 1);
    out->sc[2 * ib + 1] = static_cast<int16_t>(2 * (x->scales[ib] >> 4) + 1);
    for (int l = 0; l < 4; ++l) {
      const uint16_t v = U16(x->qs + 2 * (4 * ib + l));
      SignedGrid(grids::kIq2xsGrid[v & 511], grids::SignsWithParity(v >> 9), 8, out->q + 32 * ib + 8 * l);
    }
  }
}

void DecodeIQ2_S(const BlockIQ2_S* x, DecodedK* out) {
  ClearMins(out);
  out->d = Fp16ToFp32(x->d);
  const uint8_t* signs = x->qs + 32;
  for (int ib = 0; ib < 8; ++ib) {
    out->sc[2 * ib] = static_cast<int16_t>(2 * (x->scales[ib] & 0xF) + 1);
    out->sc[2 * ib + 1] = static_cast<int16_t>(2 * (x->scales[ib] >> 4) + 1);
    for (int l = 0; l < 4; ++l) {
      const int idx = x->qs[4 * ib + l] | ((x->qh[ib] << (8 - 2 * l)) & 0x300);
      SignedGrid(grids::kIq2sGrid[idx], signs[4 * ib + l], 8, out->q + 32 * ib + 8 * l);
    }
  }
}

void DecodeIQ3_XXS(const BlockIQ3_XXS* x, DecodedK* out) {
  ClearMins(out);
  out->d = Fp16ToFp32(x->d);
  const uint8_t* scales_and_signs = x->qs + 64;
  for (int ib = 0; ib < 8; ++ib) {
    const uint32_t aux = U32(scales_and_signs + 4 * ib);
    out->sc[2 * ib] = out->sc[2 * ib + 1] = static_cast<int16_t>(2 * (aux >> 28) + 1);
    for (int l = 0; l < 4; ++l) {
      const uint32_t signs = grids::SignsWithParity(aux >> (7 * l));
      int8_t* q = out->q + 32 * ib + 8 * l;
      SignedGrid(grids::kIq3xxsGrid[x->qs[8 * ib + 2 * l]], signs, 4, q);
      SignedGrid(grids::kIq3xxsGrid[x->qs[8 * ib + 2 * l + 1]], signs >> 4, 4, q + 4);
    }
  }
}

void DecodeIQ3_S(const BlockIQ3_S* x, DecodedK* out) {
  ClearMins(out);
  out->d = Fp16ToFp32(x->d);
  for (int ib = 0; ib < 8; ++ib) {
    const int s = (x->scales[ib / 2] >> (4 * (ib % 2))) & 0xF;
    out->sc[2 * ib] = out->sc[2 * ib + 1] = static_cast<int16_t>(1 + 2 * s);
    const uint8_t* qs = x->qs + 8 * ib;
    const int qh = x->qh[ib];
    for (int l = 0; l < 4; ++l) {
      const uint32_t signs = x->signs[4 * ib + l];
      int8_t* q = out->q + 32 * ib + 8 * l;
      SignedGrid(grids::kIq3sGrid[qs[2 * l] | ((qh << (8 - 2 * l)) & 256)], signs, 4, q);
      SignedGrid(grids::kIq3sGrid[qs[2 * l + 1] | ((qh << (7 - 2 * l)) & 256)], signs >> 4, 4, q + 4);
    }
  }
}

void DecodeIQ1_S(const BlockIQ1_S* x, DecodedK* out) {
  ClearMins(out);
  out->d = Fp16ToFp32(x->d);
  for (int ib = 0; ib < 8; ++ib) {
    const uint16_t qh = U16(x->qh + 2 * ib);
    out->sc[2 * ib] = out->sc[2 * ib + 1] = static_cast<int16_t>(2 * ((qh >> 12) & 7) + 1);
    for (int l = 0; l < 4; ++l) {
      const int idx = x->qs[4 * ib + l] | (((qh >> (3 * l)) & 7) << 8);
      ShiftedGrid(grids::kIq1sGrid[idx], qh & 0x8000, out->q + 32 * ib + 8 * l);
    }
  }
}

void DecodeIQ1_M(const BlockIQ1_M* x, DecodedK* out) {
  ClearMins(out);
  uint16_t sc[4];
  std::memcpy(sc, x->scales, 8);
  const uint16_t d16 = static_cast<uint16_t>((sc[0] >> 12) | ((sc[1] >> 8) & 0x00F0) | ((sc[2] >> 4) & 0x0F00) |
                                             (sc[3] & 0xF000));
  out->d = Fp16ToFp32(d16);
  for (int ib = 0; ib < 8; ++ib) {
    const int shift = 6 * (ib % 2);
    out->sc[2 * ib] = static_cast<int16_t>(2 * ((sc[ib / 2] >> shift) & 7) + 1);
    out->sc[2 * ib + 1] = static_cast<int16_t>(2 * ((sc[ib / 2] >> (shift + 3)) & 7) + 1);
    const uint8_t* qs = x->qs + 4 * ib;
    const uint8_t* qh = x->qh + 2 * ib;
    for (int l = 0; l < 4; ++l) {
      const int h = qh[l / 2] >> (4 * (l % 2));  // bits 0-2: index bits 8-10, bit 3: shift sign
      ShiftedGrid(grids::kIq1sGrid[qs[l] | ((h & 7) << 8)], h & 8, out->q + 32 * ib + 8 * l);
    }
  }
}

}  // namespace rw::gguf
