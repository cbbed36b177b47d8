// Internal to lowbit_avx2.cc: the AVX2 decoders of the low-bit (and, for the 512-bit batch path, Q4_K / Q5_K)
// blocks into their integer form, in registers and a small buffer. Compiled with lowbit_avx2.cc's flags only.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "gguf/quant_grids.h"
#include "gguf/quants.h"
#include "gguf/quants_lowbit.h"
#include "kernels/avx2_blocks.h"
#include "kernels/lowbit_few_avx2.h"

namespace rw::kernels::lowbit_avx2::decode {

using namespace gguf;
using namespace avx2_blocks;
using TT = TensorType;

// ---- Decoders: one block -> its integer form -------------------------------------------------------------

// gguf::DecodedK with the 16 scales and mins as int16 vectors built in registers (16 scalar stores read back
// as one vector would stall on store forwarding).
struct Unpacked {
  alignas(32) int8_t q[256];
  __m256i sc;    // int16 scale of each group of 16 elements
  __m256i mins;  // Q2_K, Q4_K, Q5_K
  float d, dmin;
};

inline uint32_t U32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

inline void Store(int8_t* p, __m256i v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v); }

// q = v negated in the bytes whose bit is set in the 32 sign bits at p.
inline __m256i ApplySigns(__m256i v, uint32_t signs) {
  const __m256i m = BytesFromBits32(reinterpret_cast<const uint8_t*>(&signs));
  return _mm256_sub_epi8(_mm256_xor_si256(v, m), m);
}

// The 7 stored sign bits of IQ2_XXS / IQ2_XS / IQ3_XXS (plus the parity bit) as an 8-byte mask, 0xFF =
// negative.
struct SignMasks {
  uint64_t m[128];
  constexpr SignMasks() : m() {
    for (uint32_t i = 0; i < 128; ++i)
      for (int j = 0; j < 8; ++j)
        if ((grids::SignsWithParity(i) >> j) & 1) m[i] |= uint64_t{0xFF} << (8 * j);
  }
};
constexpr SignMasks kSignMasks;

// 4 x 7 sign bits at bit offsets 0, 7, 14, 21 -> 32 byte masks.
inline __m256i SignMask4(uint32_t aux) {
  return _mm256_set_epi64x(static_cast<int64_t>(kSignMasks.m[(aux >> 21) & 127]),
                           static_cast<int64_t>(kSignMasks.m[(aux >> 14) & 127]),
                           static_cast<int64_t>(kSignMasks.m[(aux >> 7) & 127]),
                           static_cast<int64_t>(kSignMasks.m[aux & 127]));
}
inline __m256i Negate(__m256i v, __m256i mask) { return _mm256_sub_epi8(_mm256_xor_si256(v, mask), mask); }

inline void NoMins(Unpacked* out) {
  out->dmin = 0.0f;
  out->mins = _mm256_setzero_si256();
}

// 8 unsigned bytes (one per 32-element sub-block) -> 16 int16, each twice, times `mul` plus `add`.
inline __m256i Scales8(uint64_t bytes, int mul, int add) {
  const __m128i b = _mm_cvtsi64_si128(static_cast<int64_t>(bytes));
  const __m256i v = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(b, b));
  return _mm256_add_epi16(_mm256_mullo_epi16(v, _mm256_set1_epi16(static_cast<short>(mul))),
                          _mm256_set1_epi16(static_cast<short>(add)));
}
// 16 unsigned bytes (one per group of 16) -> 16 int16 times `mul` plus `add`.
inline __m256i Scales16(__m128i bytes, int mul, int add) {
  return _mm256_add_epi16(
      _mm256_mullo_epi16(_mm256_cvtepu8_epi16(bytes), _mm256_set1_epi16(static_cast<short>(mul))),
      _mm256_set1_epi16(static_cast<short>(add)));
}
// The 4-bit scales of IQ2_XS / IQ2_S: byte ib holds groups 2 ib (low nibble) and 2 ib + 1 (high nibble).
inline __m128i NibblePairs(const uint8_t* p) {
  const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  const __m128i m4 = _mm_set1_epi8(0x0F);
  return _mm_unpacklo_epi8(_mm_and_si128(b, m4), _mm_and_si128(_mm_srli_epi16(b, 4), m4));
}

inline void DecodeQ2_K(const uint8_t* blk, Unpacked* out) {
  const auto* x = reinterpret_cast<const BlockQ2_K*>(blk);
  out->d = H2F(x->d);
  out->dmin = H2F(x->dmin);
  const __m128i s = Load128(x->scales);
  const __m128i m4 = _mm_set1_epi8(0x0F);
  out->sc = _mm256_cvtepu8_epi16(_mm_and_si128(s, m4));
  out->mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(s, 4), m4));
  const __m256i m3 = _mm256_set1_epi8(3);
  for (int n = 0; n < 2; ++n) {
    const __m256i q = Load256(x->qs + 32 * n);
    for (int j = 0; j < 4; ++j)
      Store(out->q + 32 * (4 * n + j), _mm256_and_si256(_mm256_srli_epi16(q, 2 * j), m3));
  }
}

inline void DecodeQ3_K(const uint8_t* blk, Unpacked* out) {
  const auto* x = reinterpret_cast<const BlockQ3_K*>(blk);
  NoMins(out);
  out->d = H2F(x->d);
  out->sc = Q3KScales(x);
  const __m256i m3 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1), four = _mm256_set1_epi8(4);
  const __m256i h = Load256(x->hmask);
  for (int c = 0; c < 8; ++c) {
    const __m256i low = _mm256_and_si256(_mm256_srli_epi16(Load256(x->qs + 32 * (c / 4)), 2 * (c % 4)), m3);
    const __m256i hb = _mm256_and_si256(_mm256_srli_epi16(h, c), one);
    Store(out->q + 32 * c, _mm256_sub_epi8(_mm256_or_si256(low, _mm256_slli_epi16(hb, 2)), four));
  }
}

inline __m256i Iq4Values() { return _mm256_broadcastsi128_si256(Load128(grids::kIq4nlValues)); }

inline void DecodeIQ4_XS(const uint8_t* blk, Unpacked* out) {
  const auto* x = reinterpret_cast<const BlockIQ4_XS*>(blk);
  NoMins(out);
  out->d = H2F(x->d);
  const __m256i values = Iq4Values();
  out->sc = Iq4xsScales(x);
  for (int ib = 0; ib < 8; ++ib) {
    Store(out->q + 32 * ib, _mm256_shuffle_epi8(values, UnpackNibbles16(x->qs + 16 * ib)));
  }
}

inline void DecodeIQ2_XXS(const uint8_t* blk, Unpacked* out) {
  const auto* x = reinterpret_cast<const BlockIQ2_XXS*>(blk);
  NoMins(out);
  out->d = H2F(x->d);
  uint64_t ls = 0;
  for (int ib = 0; ib < 8; ++ib) ls |= static_cast<uint64_t>(U32(x->qs + 8 * ib + 4) >> 28) << (8 * ib);
  out->sc = Scales8(ls, 2, 1);
  for (int ib = 0; ib < 8; ++ib) {
    const uint8_t* idx = x->qs + 8 * ib;
    const uint32_t aux = U32(x->qs + 8 * ib + 4);
    const __m256i g = _mm256_set_epi64x(
        static_cast<int64_t>(grids::kIq2xxsGrid[idx[3]]), static_cast<int64_t>(grids::kIq2xxsGrid[idx[2]]),
        static_cast<int64_t>(grids::kIq2xxsGrid[idx[1]]), static_cast<int64_t>(grids::kIq2xxsGrid[idx[0]]));
    Store(out->q + 32 * ib, Negate(g, SignMask4(aux)));
  }
}

inline void DecodeIQ3_XXS(const uint8_t* blk, Unpacked* out) {
  const auto* x = reinterpret_cast<const BlockIQ3_XXS*>(blk);
  NoMins(out);
  out->d = H2F(x->d);
  uint64_t ls = 0;
  for (int ib = 0; ib < 8; ++ib) ls |= static_cast<uint64_t>(U32(x->qs + 64 + 4 * ib) >> 28) << (8 * ib);
  out->sc = Scales8(ls, 2, 1);
  for (int ib = 0; ib < 8; ++ib) {
    const uint8_t* qs = x->qs + 8 * ib;
    const uint32_t aux = U32(x->qs + 64 + 4 * ib);
    const auto g = [&](int k) { return static_cast<int>(grids::kIq3xxsGrid[qs[k]]); };
    const __m256i v = _mm256_set_epi32(g(7), g(6), g(5), g(4), g(3), g(2), g(1), g(0));
    Store(out->q + 32 * ib, Negate(v, SignMask4(aux)));
  }
}

inline int64_t G64(const uint64_t* grid, int idx) { return static_cast<int64_t>(grid[idx]); }

inline void DecodeIQ2_XS(const uint8_t* blk, Unpacked* out) {
  const auto* x = reinterpret_cast<const BlockIQ2_XS*>(blk);
  NoMins(out);
  out->d = H2F(x->d);
  out->sc = Scales16(NibblePairs(x->scales), 2, 1);
  for (int ib = 0; ib < 8; ++ib) {
    uint16_t v[4];
    std::memcpy(v, x->qs + 8 * ib, 8);
    const __m256i g =
        _mm256_set_epi64x(G64(grids::kIq2xsGrid, v[3] & 511), G64(grids::kIq2xsGrid, v[2] & 511),
                          G64(grids::kIq2xsGrid, v[1] & 511), G64(grids::kIq2xsGrid, v[0] & 511));
    const __m256i m = _mm256_set_epi64x(
        static_cast<int64_t>(kSignMasks.m[v[3] >> 9]), static_cast<int64_t>(kSignMasks.m[v[2] >> 9]),
        static_cast<int64_t>(kSignMasks.m[v[1] >> 9]), static_cast<int64_t>(kSignMasks.m[v[0] >> 9]));
    Store(out->q + 32 * ib, Negate(g, m));
  }
}

inline void DecodeIQ2_S(const uint8_t* blk, Unpacked* out) {
  const auto* x = reinterpret_cast<const BlockIQ2_S*>(blk);
  NoMins(out);
  out->d = H2F(x->d);
  out->sc = Scales16(NibblePairs(x->scales), 2, 1);
  for (int ib = 0; ib < 8; ++ib) {
    const uint8_t* qs = x->qs + 4 * ib;
    const int qh = x->qh[ib];
    const auto idx = [&](int l) { return qs[l] | ((qh << (8 - 2 * l)) & 0x300); };
    const __m256i g = _mm256_set_epi64x(G64(grids::kIq2sGrid, idx(3)), G64(grids::kIq2sGrid, idx(2)),
                                        G64(grids::kIq2sGrid, idx(1)), G64(grids::kIq2sGrid, idx(0)));
    Store(out->q + 32 * ib, ApplySigns(g, U32(x->qs + 32 + 4 * ib)));
  }
}

inline void DecodeIQ3_S(const uint8_t* blk, Unpacked* out) {
  const auto* x = reinterpret_cast<const BlockIQ3_S*>(blk);
  NoMins(out);
  out->d = H2F(x->d);
  uint64_t ls = 0;
  for (int ib = 0; ib < 8; ++ib)
    ls |= static_cast<uint64_t>((x->scales[ib / 2] >> (4 * (ib % 2))) & 0xF) << (8 * ib);
  out->sc = Scales8(ls, 2, 1);
  for (int ib = 0; ib < 8; ++ib) {
    const uint8_t* qs = x->qs + 8 * ib;
    const int qh = x->qh[ib];
    const auto g = [&](int k) { return static_cast<int>(grids::kIq3sGrid[qs[k] | (((qh >> k) & 1) << 8)]); };
    const __m256i v = _mm256_set_epi32(g(7), g(6), g(5), g(4), g(3), g(2), g(1), g(0));
    Store(out->q + 32 * ib, ApplySigns(v, U32(x->signs + 4 * ib)));
  }
}

// IQ1: 8 * g + shift with g in {-1, 0, 1} (bytes) and shift +-1 per 8-element group.
inline __m256i ShiftedGrid(__m256i g, __m256i shift) {
  const __m256i g2 = _mm256_add_epi8(g, g), g4 = _mm256_add_epi8(g2, g2);
  return _mm256_add_epi8(_mm256_add_epi8(g4, g4), shift);
}
inline int64_t Shift64(bool minus) { return minus ? -1 : 0x0101010101010101; }

inline void DecodeIQ1_S(const uint8_t* blk, Unpacked* out) {
  const auto* x = reinterpret_cast<const BlockIQ1_S*>(blk);
  NoMins(out);
  out->d = H2F(x->d);
  uint16_t qhs[8];
  std::memcpy(qhs, x->qh, 16);
  uint64_t ls = 0;
  for (int ib = 0; ib < 8; ++ib) ls |= static_cast<uint64_t>((qhs[ib] >> 12) & 7) << (8 * ib);
  out->sc = Scales8(ls, 2, 1);
  for (int ib = 0; ib < 8; ++ib) {
    const uint16_t qh = qhs[ib];
    const uint8_t* qs = x->qs + 4 * ib;
    const auto idx = [&](int l) { return qs[l] | (((qh >> (3 * l)) & 7) << 8); };
    const __m256i g = _mm256_set_epi64x(G64(grids::kIq1sGrid, idx(3)), G64(grids::kIq1sGrid, idx(2)),
                                        G64(grids::kIq1sGrid, idx(1)), G64(grids::kIq1sGrid, idx(0)));
    Store(out->q + 32 * ib, ShiftedGrid(g, _mm256_set1_epi64x(Shift64(qh & 0x8000))));
  }
}

inline void DecodeIQ1_M(const uint8_t* blk, Unpacked* out) {
  const auto* x = reinterpret_cast<const BlockIQ1_M*>(blk);
  NoMins(out);
  uint16_t sc[4];
  std::memcpy(sc, x->scales, 8);
  out->d = H2F(static_cast<uint16_t>((sc[0] >> 12) | ((sc[1] >> 8) & 0x00F0) | ((sc[2] >> 4) & 0x0F00) |
                                     (sc[3] & 0xF000)));
  // Group g's 3 bits: bits 3 (g % 4) of sc[g / 4].
  uint64_t lo = 0, hi = 0;
  for (int g = 0; g < 8; ++g) {
    lo |= static_cast<uint64_t>((sc[g / 4] >> (3 * (g % 4))) & 7) << (8 * g);
    hi |= static_cast<uint64_t>((sc[2 + g / 4] >> (3 * (g % 4))) & 7) << (8 * g);
  }
  out->sc = Scales16(_mm_set_epi64x(static_cast<int64_t>(hi), static_cast<int64_t>(lo)), 2, 1);
  for (int ib = 0; ib < 8; ++ib) {
    const uint8_t* qs = x->qs + 4 * ib;
    const uint8_t* qh = x->qh + 2 * ib;
    const auto h = [&](int l) { return qh[l / 2] >> (4 * (l % 2)); };
    const auto idx = [&](int l) { return qs[l] | ((h(l) & 7) << 8); };
    const __m256i g = _mm256_set_epi64x(G64(grids::kIq1sGrid, idx(3)), G64(grids::kIq1sGrid, idx(2)),
                                        G64(grids::kIq1sGrid, idx(1)), G64(grids::kIq1sGrid, idx(0)));
    const __m256i shifts =
        _mm256_set_epi64x(Shift64(h(3) & 8), Shift64(h(2) & 8), Shift64(h(1) & 8), Shift64(h(0) & 8));
    Store(out->q + 32 * ib, ShiftedGrid(g, shifts));
  }
}

inline void DecodeTQ2_0(const uint8_t* blk, Unpacked* out) {
  const auto* x = reinterpret_cast<const BlockTQ2_0*>(blk);
  NoMins(out);
  out->d = H2F(x->d);
  out->sc = _mm256_set1_epi16(1);
  const __m256i m3 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
  for (int n = 0; n < 2; ++n) {
    const __m256i q = Load256(x->qs + 32 * n);
    for (int j = 0; j < 4; ++j)
      Store(out->q + 32 * (4 * n + j),
            _mm256_sub_epi8(_mm256_and_si256(_mm256_srli_epi16(q, 2 * j), m3), one));
  }
}

// Q4_K / Q5_K (for the 512-bit batch path only): unsigned values 0..15 / 0..31, one 6-bit scale and min per
// 32 elements, each repeated for both groups of 16 so that the lanes and the mins product are those of
// kernels/vec_dot_avx2.cc's RowsQx_K.
template <bool kFive>
inline void DecodeQx_K(const uint8_t* blk, Unpacked* out) {
  const uint8_t *qs, *packed, *qh = nullptr;
  uint16_t d, dmin;
  if constexpr (kFive) {
    const auto* x = reinterpret_cast<const BlockQ5_K*>(blk);
    qs = x->qs, packed = x->scales, qh = x->qh, d = x->d, dmin = x->dmin;
  } else {
    const auto* x = reinterpret_cast<const BlockQ4_K*>(blk);
    qs = x->qs, packed = x->scales, d = x->d, dmin = x->dmin;
  }
  out->d = H2F(d);
  out->dmin = H2F(dmin);
  uint32_t utmp[4];
  UnpackScalesMins(packed, utmp);
  out->sc = Scales8(utmp[0] | (static_cast<uint64_t>(utmp[1]) << 32), 1, 0);
  out->mins = Scales8(utmp[2] | (static_cast<uint64_t>(utmp[3]) << 32), 1, 0);
  const __m256i m4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
  const __m256i h = kFive ? Load256(qh) : _mm256_setzero_si256();
  for (int c = 0; c < 4; ++c) {
    const __m256i q = Load256(qs + 32 * c);
    __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
    if constexpr (kFive) {
      lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2 * c), one), 4));
      hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2 * c + 1), one), 4));
    }
    Store(out->q + 64 * c, lo);
    Store(out->q + 64 * c + 32, hi);
  }
}

// Q6_K (for the 512-bit batch path only): the unsigned six-bit values 0..63 and the signed 8-bit scale of
// each group of 16; the -32 offset is the integer start -32 * (scales . bsums) of kernels/vec_dot_avx2.cc's
// RowsQ6_K, which the batch kernel adds per token (DotDecodedVnni's kQ6Start).
inline void DecodeQ6_K(const uint8_t* blk, Unpacked* out) {
  const auto* x = reinterpret_cast<const BlockQ6_K*>(blk);
  NoMins(out);
  out->d = H2F(x->d);
  out->sc = _mm256_cvtepi8_epi16(Load128(x->scales));
  for (int n = 0; n < 2; ++n) {
    __m256i q[4];
    UnpackQ6Half(x, n, q);
    for (int k = 0; k < 4; ++k) Store(out->q + 128 * n + 32 * k, q[k]);
  }
}

// TQ1_0 (base-3 packing, rare): the scalar decoder of gguf (same integers).
template <TT kType>
inline void DecodeScalar(const uint8_t* blk, Unpacked* out) {
  DecodedK dec;
  gguf::DecodeK(kType, blk, &dec);
  std::memcpy(out->q, dec.q, 256);
  out->sc = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(dec.sc));
  out->mins = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(dec.mins));
  out->d = dec.d;
  out->dmin = dec.dmin;
}

using DecodeFn = void (*)(const uint8_t*, Unpacked*);

}  // namespace rw::kernels::lowbit_avx2::decode
