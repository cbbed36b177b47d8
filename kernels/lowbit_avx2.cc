// AVX2 dot products and batch kernels of the low-bit weight types; see lowbit_avx2.h and gguf/quants_lowbit.h.
//
// A weight block is decoded once into its integer form (int8 values, int16 scale per 16 elements, float d), in
// registers and a small L1 buffer; then every token of the call is dotted with it: per 32-element chunk,
// maddubs(|q|, sign(a, q)) gives exact int16 pair sums (|q|, |a| <= 127), madd with the chunk's scales gives the
// int32 lanes of the twin, and one FMA per block adds them into the token's 8 float lanes.
#include "kernels/lowbit_avx2.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "gguf/quant_grids.h"
#include "gguf/quants_lowbit.h"
#include "kernels/avx2_blocks.h"
#include "kernels/lowbit_few_avx2.h"

namespace rw::kernels::lowbit_avx2 {
namespace {

using namespace gguf;
using namespace avx2_blocks;
using TT = TensorType;

// ---- Decoders: one block -> its integer form -------------------------------------------------------------

// gguf::DecodedK with the 16 scales and mins as int16 vectors built in registers (16 scalar stores read back
// as one vector would stall on store forwarding).
struct Unpacked {
  alignas(32) int8_t q[256];
  __m256i sc;    // int16 scale of each group of 16 elements
  __m256i mins;  // Q2_K only
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

// The 7 stored sign bits of IQ2_XXS / IQ2_XS / IQ3_XXS (plus the parity bit) as an 8-byte mask, 0xFF = negative.
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


void NoMins(Unpacked* out) {
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
  return _mm256_add_epi16(_mm256_mullo_epi16(_mm256_cvtepu8_epi16(bytes), _mm256_set1_epi16(static_cast<short>(mul))),
                          _mm256_set1_epi16(static_cast<short>(add)));
}
// The 4-bit scales of IQ2_XS / IQ2_S: byte ib holds groups 2 ib (low nibble) and 2 ib + 1 (high nibble).
inline __m128i NibblePairs(const uint8_t* p) {
  const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  const __m128i m4 = _mm_set1_epi8(0x0F);
  return _mm_unpacklo_epi8(_mm_and_si128(b, m4), _mm_and_si128(_mm_srli_epi16(b, 4), m4));
}

void DecodeQ2_K(const uint8_t* blk, Unpacked* out) {
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
    for (int j = 0; j < 4; ++j) Store(out->q + 32 * (4 * n + j), _mm256_and_si256(_mm256_srli_epi16(q, 2 * j), m3));
  }
}

void DecodeQ3_K(const uint8_t* blk, Unpacked* out) {
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

void DecodeIQ4_XS(const uint8_t* blk, Unpacked* out) {
  const auto* x = reinterpret_cast<const BlockIQ4_XS*>(blk);
  NoMins(out);
  out->d = H2F(x->d);
  const __m256i values = Iq4Values();
  out->sc = Iq4xsScales(x);
  for (int ib = 0; ib < 8; ++ib) {
    Store(out->q + 32 * ib, _mm256_shuffle_epi8(values, UnpackNibbles16(x->qs + 16 * ib)));
  }
}

void DecodeIQ2_XXS(const uint8_t* blk, Unpacked* out) {
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

void DecodeIQ3_XXS(const uint8_t* blk, Unpacked* out) {
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

void DecodeIQ2_XS(const uint8_t* blk, Unpacked* out) {
  const auto* x = reinterpret_cast<const BlockIQ2_XS*>(blk);
  NoMins(out);
  out->d = H2F(x->d);
  out->sc = Scales16(NibblePairs(x->scales), 2, 1);
  for (int ib = 0; ib < 8; ++ib) {
    uint16_t v[4];
    std::memcpy(v, x->qs + 8 * ib, 8);
    const __m256i g = _mm256_set_epi64x(G64(grids::kIq2xsGrid, v[3] & 511), G64(grids::kIq2xsGrid, v[2] & 511),
                                        G64(grids::kIq2xsGrid, v[1] & 511), G64(grids::kIq2xsGrid, v[0] & 511));
    const __m256i m = _mm256_set_epi64x(
        static_cast<int64_t>(kSignMasks.m[v[3] >> 9]), static_cast<int64_t>(kSignMasks.m[v[2] >> 9]),
        static_cast<int64_t>(kSignMasks.m[v[1] >> 9]), static_cast<int64_t>(kSignMasks.m[v[0] >> 9]));
    Store(out->q + 32 * ib, Negate(g, m));
  }
}

void DecodeIQ2_S(const uint8_t* blk, Unpacked* out) {
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

void DecodeIQ3_S(const uint8_t* blk, Unpacked* out) {
  const auto* x = reinterpret_cast<const BlockIQ3_S*>(blk);
  NoMins(out);
  out->d = H2F(x->d);
  uint64_t ls = 0;
  for (int ib = 0; ib < 8; ++ib) ls |= static_cast<uint64_t>((x->scales[ib / 2] >> (4 * (ib % 2))) & 0xF) << (8 * ib);
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

void DecodeIQ1_S(const uint8_t* blk, Unpacked* out) {
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

void DecodeIQ1_M(const uint8_t* blk, Unpacked* out) {
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
    const __m256i shifts = _mm256_set_epi64x(Shift64(h(3) & 8), Shift64(h(2) & 8), Shift64(h(1) & 8),
                                             Shift64(h(0) & 8));
    Store(out->q + 32 * ib, ShiftedGrid(g, shifts));
  }
}

void DecodeTQ2_0(const uint8_t* blk, Unpacked* out) {
  const auto* x = reinterpret_cast<const BlockTQ2_0*>(blk);
  NoMins(out);
  out->d = H2F(x->d);
  out->sc = _mm256_set1_epi16(1);
  const __m256i m3 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
  for (int n = 0; n < 2; ++n) {
    const __m256i q = Load256(x->qs + 32 * n);
    for (int j = 0; j < 4; ++j)
      Store(out->q + 32 * (4 * n + j), _mm256_sub_epi8(_mm256_and_si256(_mm256_srli_epi16(q, 2 * j), m3), one));
  }
}

// TQ1_0 (base-3 packing, rare): the scalar decoder of gguf (same integers).
template <TT kType>
void DecodeScalar(const uint8_t* blk, Unpacked* out) {
  DecodedK dec;
  gguf::DecodeK(kType, blk, &dec);
  std::memcpy(out->q, dec.q, 256);
  out->sc = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(dec.sc));
  out->mins = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(dec.mins));
  out->d = dec.d;
  out->dmin = dec.dmin;
}

using DecodeFn = void (*)(const uint8_t*, Unpacked*);

// ---- Dot of one decoded block with T tokens ---------------------------------------------------------------

// Chunk c's scales: sc[2c] in the low 128-bit lane, sc[2c + 1] in the high one (int16).
inline __m256i ChunkScales(__m256i sc16, int c) {
  const __m256i pair = _mm256_permutevar8x32_epi32(sc16, _mm256_set1_epi32(c));
  return _mm256_shuffle_epi8(pair, _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2,
                                                    3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3));
}

// The float operations of one block for one token: its 8 int32 lane sums times d * d_act (dw = d * factor), and
// for Q2_K minus dmin * d_act * (mins . bsums).
template <bool kMins>
inline void AddBlock(const Unpacked& dec, float dw, const BlockQ8_K* y, __m256i sumi, __m256* acc) {
  *acc = _mm256_fmadd_ps(_mm256_set1_ps(dw * y->d), _mm256_cvtepi32_ps(sumi), *acc);
  if constexpr (kMins) {
    const __m256i bsums = Load256(reinterpret_cast<const uint8_t*>(y) + offsetof(BlockQ8_K, bsums));
    const __m256i m = _mm256_madd_epi16(bsums, dec.mins);
    *acc = _mm256_fnmadd_ps(_mm256_set1_ps(dec.dmin * y->d), _mm256_cvtepi32_ps(m), *acc);
  }
}

template <int T, bool kMins>
inline void DotDecoded(const Unpacked& dec, float factor, const BlockQ8_K* const* y, __m256* acc) {
  const __m256i sc16 = dec.sc;
  __m256i sumi[T];
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) sumi[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
  for (int c = 0; c < 8; ++c) {
    const __m256i q = Load256(dec.q + 32 * c);
    const __m256i aq = _mm256_sign_epi8(q, q);
    const __m256i s = ChunkScales(sc16, c);
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      const __m256i p = _mm256_maddubs_epi16(aq, _mm256_sign_epi8(Load256(y[t]->qs + 32 * c), q));
      sumi[t] = _mm256_add_epi32(sumi[t], _mm256_madd_epi16(p, s));
    }
  }
  const float dw = dec.d * factor;
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) AddBlock<kMins>(dec, dw, y[t], sumi[t], &acc[t]);
}

// The same products with 512-bit registers (CPUs with AVX-512 BW; GemmRows' `wide`): chunks 2k and 2k + 1 side by
// side (64 bytes of weights and of each token's activations), |q| times the activations negated where q < 0 (the
// sign trick without vpsignb), folded into the twin's 8 int32 lanes before the float operations (exact integer
// sums), so the bits are DotDecoded's.
#define REWIND_LOWBIT_WIDE __attribute__((target("avx2,fma,f16c,avx512f,avx512dq,avx512bw,avx512vl")))
// GCC 12's AVX-512 headers start broadcasts from _mm512_undefined_*(), which -Wmaybe-uninitialized flags.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

template <int T, bool kMins>
REWIND_LOWBIT_WIDE inline void DotDecodedWide(const Unpacked& dec, float factor, const BlockQ8_K* const* y,
                                              __m256* acc) {
  __m512i sumi[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) sumi[t] = _mm512_setzero_si512();
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    const __m512i q = _mm512_loadu_si512(dec.q + 64 * k);
    const __m512i aq = _mm512_abs_epi8(q);
    const __mmask64 neg = _mm512_movepi8_mask(q);
    const __m512i s = PairI(ChunkScales(dec.sc, 2 * k), ChunkScales(dec.sc, 2 * k + 1));
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m512i a = _mm512_loadu_si512(y[t]->qs + 64 * k);
      const __m512i sa = _mm512_mask_sub_epi8(a, neg, _mm512_setzero_si512(), a);
      sumi[t] = _mm512_add_epi32(sumi[t], _mm512_madd_epi16(_mm512_maddubs_epi16(aq, sa), s));
    }
  }
  const float dw = dec.d * factor;
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    const __m256i s8 = _mm256_add_epi32(_mm512_castsi512_si256(sumi[t]), _mm512_extracti64x4_epi64(sumi[t], 1));
    AddBlock<kMins>(dec, dw, y[t], s8, &acc[t]);
  }
}

// One weight row against n_tok tokens (act[t] = token t's Q8_K blocks): out[t * out_stride]. Up to 3 tokens
// (decode, short verify batches) the accumulators stay in registers; from 4 on they live in memory, where the
// independent tokens hide the latency of the load-FMA-store chains. Same operations either way.
constexpr int kMaxTok = 32;

template <DecodeFn kDecode, bool kMins, int T>
void RowKFew(int64_t nb, size_t block_bytes, float factor, const uint8_t* w, const uint8_t* const* act,
             float* out, int64_t out_stride) {
  __m256 acc[T];
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  Unpacked dec;
  for (int64_t i = 0; i < nb; ++i) {
    _mm_prefetch(reinterpret_cast<const char*>(w + (i + 4) * block_bytes), _MM_HINT_T0);
    kDecode(w + i * block_bytes, &dec);
    const BlockQ8_K* y[T];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) y[t] = reinterpret_cast<const BlockQ8_K*>(act[t]) + i;
    DotDecoded<T, kMins>(dec, factor, y, acc);
  }
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) out[t * out_stride] = Hsum(acc[t]);
}

// T tokens against a decoded weight row, their sums in registers.
template <int T, bool kMins>
REWIND_LOWBIT_WIDE void TokensWide(const Unpacked* row, int64_t nb, float factor, const uint8_t* const* act,
                                   float* out, int64_t out_stride) {
  __m256 acc[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const BlockQ8_K* y[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) y[t] = reinterpret_cast<const BlockQ8_K*>(act[t]) + i;
    DotDecodedWide<T, kMins>(row[i], factor, y, acc);
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) out[t * out_stride] = Hsum(acc[t]);
}

// 4 or more tokens: the row decoded once (L1-sized buffer), then 8 tokens at a time (32 registers hold them).
template <DecodeFn kDecode, bool kMins>
REWIND_LOWBIT_WIDE void RowKWide(int64_t nb, size_t block_bytes, float factor, const uint8_t* w,
                                 const uint8_t* const* act, int n_tok, float* out, int64_t out_stride) {
  thread_local std::vector<Unpacked> row;  // [nb]
  if (static_cast<int64_t>(row.size()) < nb) row.resize(static_cast<size_t>(nb));
  for (int64_t i = 0; i < nb; ++i) {
    _mm_prefetch(reinterpret_cast<const char*>(w + (i + 4) * block_bytes), _MM_HINT_T0);
    kDecode(w + i * block_bytes, &row[i]);
  }
  int t = 0;
  for (; t + 8 <= n_tok; t += 8) TokensWide<8, kMins>(row.data(), nb, factor, act + t, out + t * out_stride, out_stride);
  for (; t + 4 <= n_tok; t += 4) TokensWide<4, kMins>(row.data(), nb, factor, act + t, out + t * out_stride, out_stride);
  for (; t < n_tok; ++t) TokensWide<1, kMins>(row.data(), nb, factor, act + t, out + t * out_stride, out_stride);
}
#pragma GCC diagnostic pop

template <DecodeFn kDecode, bool kMins>
void RowK(int64_t nb, size_t block_bytes, float factor, const uint8_t* w, const uint8_t* const* act, int n_tok,
          float* out, int64_t out_stride, bool wide) {
  if (wide && n_tok >= 4) return RowKWide<kDecode, kMins>(nb, block_bytes, factor, w, act, n_tok, out, out_stride);
  switch (n_tok) {
    case 1: return RowKFew<kDecode, kMins, 1>(nb, block_bytes, factor, w, act, out, out_stride);
    case 2: return RowKFew<kDecode, kMins, 2>(nb, block_bytes, factor, w, act, out, out_stride);
    case 3: return RowKFew<kDecode, kMins, 3>(nb, block_bytes, factor, w, act, out, out_stride);
    default: break;
  }
  __m256 acc[kMaxTok];
  for (int t = 0; t < n_tok; ++t) acc[t] = _mm256_setzero_ps();
  Unpacked dec;
  for (int64_t i = 0; i < nb; ++i) {
    _mm_prefetch(reinterpret_cast<const char*>(w + (i + 4) * block_bytes), _MM_HINT_T0);
    kDecode(w + i * block_bytes, &dec);
    const BlockQ8_K* y[kMaxTok];
    for (int t = 0; t < n_tok; ++t) y[t] = reinterpret_cast<const BlockQ8_K*>(act[t]) + i;
    int t = 0;
    for (; t + 4 <= n_tok; t += 4) DotDecoded<4, kMins>(dec, factor, y + t, acc + t);
    for (; t < n_tok; ++t) DotDecoded<1, kMins>(dec, factor, y + t, acc + t);
  }
  for (int t = 0; t < n_tok; ++t) out[t * out_stride] = Hsum(acc[t]);
}

// ---- IQ4_NL / MXFP4 against Q8_0 --------------------------------------------------------------------------

// kT > 0: exactly kT tokens, accumulators in registers; kT == 0: n_tok tokens (<= kMaxTok).
template <bool kMx, int kT>
void Row32N(int64_t nb, const uint8_t* w, const uint8_t* const* act, int n_tok, float* out, int64_t out_stride) {
  if constexpr (kT > 0) n_tok = kT;
  const __m256i values = kMx ? _mm256_broadcastsi128_si256(Load128(grids::kFp4Values)) : Iq4Values();
  constexpr size_t kBytes = kMx ? sizeof(BlockMXFP4) : sizeof(BlockIQ4_NL);
  __m256 acc[kT > 0 ? kT : kMaxTok];
  for (int t = 0; t < n_tok; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* blk = w + i * kBytes;
    _mm_prefetch(reinterpret_cast<const char*>(blk + 8 * kBytes), _MM_HINT_T0);
    float dw;
    __m256i q;
    if constexpr (kMx) {
      dw = E8M0Half(blk[0]);
      q = _mm256_shuffle_epi8(values, UnpackNibbles16(blk + 1));
    } else {
      uint16_t d;
      std::memcpy(&d, blk, 2);
      dw = H2F(d);
      q = _mm256_shuffle_epi8(values, UnpackNibbles16(blk + 2));
    }
    const __m256i aq = _mm256_sign_epi8(q, q);
    for (int t = 0; t < n_tok; ++t) {
      const auto* y = reinterpret_cast<const BlockQ8_0*>(act[t]) + i;
      const __m256i s = DotUnsigned(aq, _mm256_sign_epi8(Load256(y->qs), q));
      acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dw * H2F(y->d)), _mm256_cvtepi32_ps(s), acc[t]);
    }
  }
  for (int t = 0; t < n_tok; ++t) out[t * out_stride] = Hsum(acc[t]);
}

template <bool kMx>
void Row32(int64_t nb, const uint8_t* w, const uint8_t* const* act, int n_tok, float* out, int64_t out_stride,
           bool /*wide*/) {
  switch (n_tok) {
    case 1: return Row32N<kMx, 1>(nb, w, act, n_tok, out, out_stride);
    case 2: return Row32N<kMx, 2>(nb, w, act, n_tok, out, out_stride);
    case 3: return Row32N<kMx, 3>(nb, w, act, n_tok, out, out_stride);
    default: return Row32N<kMx, 0>(nb, w, act, n_tok, out, out_stride);
  }
}

// ---- Dispatch ---------------------------------------------------------------------------------------------

using RowFn = void (*)(int64_t nb, const uint8_t* w, const uint8_t* const* act, int n_tok, float* out,
                       int64_t out_stride, bool wide);

template <TT kType, DecodeFn kDecode>
void RowOf(int64_t nb, const uint8_t* w, const uint8_t* const* act, int n_tok, float* out, int64_t out_stride,
           bool wide) {
  const float factor = DotFactorK(kType);
  if (RowFew(kType, nb, factor, w, act, n_tok, out, out_stride)) return;  // decode path of some types
  RowK<kDecode, kType == TT::kQ2_K>(nb, static_cast<size_t>(GetTypeInfo(kType)->block_bytes), factor, w, act,
                                    n_tok, out, out_stride, wide);
}

RowFn RowKernel(TT t) {
  switch (t) {
    case TT::kQ2_K: return RowOf<TT::kQ2_K, DecodeQ2_K>;
    case TT::kQ3_K: return RowOf<TT::kQ3_K, DecodeQ3_K>;
    case TT::kIQ4_XS: return RowOf<TT::kIQ4_XS, DecodeIQ4_XS>;
    case TT::kIQ2_XXS: return RowOf<TT::kIQ2_XXS, DecodeIQ2_XXS>;
    case TT::kIQ3_XXS: return RowOf<TT::kIQ3_XXS, DecodeIQ3_XXS>;
    case TT::kIQ2_XS: return RowOf<TT::kIQ2_XS, DecodeIQ2_XS>;
    case TT::kIQ2_S: return RowOf<TT::kIQ2_S, DecodeIQ2_S>;
    case TT::kIQ3_S: return RowOf<TT::kIQ3_S, DecodeIQ3_S>;
    case TT::kIQ1_S: return RowOf<TT::kIQ1_S, DecodeIQ1_S>;
    case TT::kIQ1_M: return RowOf<TT::kIQ1_M, DecodeIQ1_M>;
    case TT::kTQ1_0: return RowOf<TT::kTQ1_0, DecodeScalar<TT::kTQ1_0>>;
    case TT::kTQ2_0: return RowOf<TT::kTQ2_0, DecodeTQ2_0>;
    case TT::kIQ4_NL: return Row32<false>;
    case TT::kMXFP4: return Row32<true>;
    default: return nullptr;
  }
}

// True if the activation row (VecDotType blocks) holds a -128.
bool HasMinus128Act(TT t, const void* act, int64_t nb) {
  if (!IsLowbitKType(t)) return avx2_blocks::HasMinus128(act, nb);
  const auto* y = static_cast<const BlockQ8_K*>(act);
  const __m256i m = _mm256_set1_epi8(static_cast<char>(0x80));
  __m256i any = _mm256_setzero_si256();
  for (int64_t i = 0; i < nb; ++i)
    for (int c = 0; c < 8; ++c) any = _mm256_or_si256(any, _mm256_cmpeq_epi8(Load256(y[i].qs + 32 * c), m));
  return !_mm256_testz_si256(any, any);
}

}  // namespace

void GemmRows(TT t, int64_t n, const void* w, size_t w_stride, int64_t n_rows, const void* act, size_t act_stride,
              int64_t n_tok, float* out, int64_t out_stride, bool wide) {
  const RowFn row_fn = RowKernel(t);
  const int64_t nb = n / BlockSize(t);
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* ab = static_cast<const uint8_t*>(act);
  for (int64_t t0 = 0; t0 < n_tok; t0 += kMaxTok) {
    const int tn = static_cast<int>(std::min<int64_t>(kMaxTok, n_tok - t0));
    const uint8_t* at[kMaxTok];
    bool minus128[kMaxTok];
    bool any = false;
    for (int k = 0; k < tn; ++k) {
      at[k] = ab + (t0 + k) * act_stride;
      minus128[k] = HasMinus128Act(t, at[k], nb);
      any |= minus128[k];
    }
    for (int64_t r = 0; r < n_rows; ++r) {
      const uint8_t* row = wb + r * w_stride;
      float* o = out + t0 * out_stride + r;
      row_fn(nb, row, at, tn, o, out_stride, wide);
      if (!any) continue;
      for (int k = 0; k < tn; ++k)
        if (minus128[k]) o[k * out_stride] = DotLowbitRef(t, row, at[k], nb);
    }
  }
}

void VecDotRows(TT t, int64_t n, const void* w, size_t w_stride, int64_t n_rows, const void* act, float* out) {
  GemmRows(t, n, w, w_stride, n_rows, act, 0, 1, out, 1, false);
}

}  // namespace rw::kernels::lowbit_avx2
