// Internal to lowbit_avx2.cc: IQ2_XS, IQ2_S and IQ3_S (the grid types next to the XXS ones in
// llama-quantize's mixes) for the decode-path kernels of lowbit_iq_few_avx2.h: grid entries inserted into
// registers (on AVX-512 IQ3_S looks its 512 entries up as codes like IQ3_XXS, the ninth index bit from qh
// selecting between two 256-entry tables), signs as +-1 bytes (AVX2) or a 64-bit negation mask per chunk pair
// (AVX-512; IQ2_S / IQ3_S store the bits as they are, IQ2_XS as 7 bits per 8 elements plus parity), an int16
// scale per 16 elements; and RowsFew, the decode-path entry of all five grid types.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "gguf/quant_grids.h"
#include "gguf/quants.h"
#include "kernels/avx2_blocks.h"
#include "kernels/lowbit_iq1_few_avx2.h"
#include "kernels/lowbit_iq_few_avx2.h"

namespace rw::kernels::lowbit_avx2::iq_few {

// The 16 int16 scales 2 s + 1 of 8 bytes holding a 4-bit s per 16 elements (group 2 ib: low nibble of byte
// ib).
inline __m256i NibbleScales(const uint8_t* p) {
  const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  const __m128i m4 = _mm_set1_epi8(0x0F);
  const __m128i s = _mm_unpacklo_epi8(_mm_and_si128(b, m4), _mm_and_si128(_mm_srli_epi16(b, 4), m4));
  return _mm256_add_epi16(_mm256_slli_epi16(_mm256_cvtepu8_epi16(s), 1), _mm256_set1_epi16(1));
}

// 32 stored sign bits -> +-1 bytes.
inline __m256i SignBits(const uint8_t* p) {
  return _mm256_or_si256(avx2_blocks::BytesFromBits32(p), _mm256_set1_epi8(1));
}

inline int64_t G64(const uint64_t* grid, int idx) { return static_cast<int64_t>(grid[idx]); }

// Four 64-bit table entries, lane l at index (uint16 l at p >> shift) & mask (IQ2_XS: a 9-bit grid index in
// bits 0-8 and 7 sign bits in bits 9-15 of each uint16).
inline __m256i LanesOfU16x4(const uint8_t* p, const uint64_t* table, int shift, uint32_t mask) {
  uint16_t v[4];
  std::memcpy(v, p, 8);
  const auto at = [&](int l) { return static_cast<int64_t>(table[(v[l] >> shift) & mask]); };
  return _mm256_set_epi64x(at(3), at(2), at(1), at(0));
}

// The chunk pairs' magnitudes by inserts.
template <class Iq>
struct InsertGrid {
  using Looked = const typename Iq::Block*;
  constexpr InsertGrid() {}
  REWIND_IQ_FEW_WIDE Looked Look(Looked x) const { return x; }
  REWIND_IQ_FEW_WIDE __m512i Pair(Looked x, int k) const {
    return _mm512_inserti64x4(_mm512_castsi256_si512(Iq::Grid(x, 2 * k)), Iq::Grid(x, 2 * k + 1), 1);
  }
};

// Scales from BlockScales (16 int16, one per 16 elements; groups 2c, 2c + 1 in chunk c's low and high
// 128-bit lanes).
struct GroupScales {
  static __m256i ChunkScale(const void*, __m256i sc, int c) {
    return _mm256_shuffle_epi8(_mm256_permute4x64_epi64(sc, c < 4 ? 0x44 : 0xEE),
                               avx2_blocks::PairShuffle(c % 4));
  }
  REWIND_IQ_FEW_WIDE static __m512i WideScale(__m512i sc, int k) {  // 128-bit lane L: group 4k + L
    const short g = static_cast<short>(4 * k);
    return _mm512_permutexvar_epi16(
        _mm512_set_epi16(g + 3, g + 3, g + 3, g + 3, g + 3, g + 3, g + 3, g + 3, g + 2, g + 2, g + 2, g + 2,
                         g + 2, g + 2, g + 2, g + 2, g + 1, g + 1, g + 1, g + 1, g + 1, g + 1, g + 1, g + 1,
                         g, g, g, g, g, g, g, g),
        sc);
  }
};

// IQ2_XS and IQ2_S: grid entries by inserts, nibble scales, d / 8 (kFactor).
template <class Iq, class B>
struct Iq2Inserted : GroupScales {
  using Block = B;
  static constexpr float kFactor = 0.125f;
  using Wide = InsertGrid<Iq>;
  static __m256i BlockScales(const Block* x) { return NibbleScales(x->scales); }
  REWIND_IQ_FEW_WIDE static __m512i WideScales(const Block* x) {
    return _mm512_castsi256_si512(BlockScales(x));
  }
};

struct Iq2xs : Iq2Inserted<Iq2xs, gguf::BlockIQ2_XS> {
  static __m256i Grid(const Block* x, int c) {
    return LanesOfU16x4(x->qs + 8 * c, gguf::grids::kIq2xsGrid, 0, 511);
  }
  static __m256i Signs(const Block* x, int c) { return LanesOfU16x4(x->qs + 8 * c, kSignBytes.m, 9, 127); }
  REWIND_IQ_FEW_WIDE static __mmask64 SignMask(const Block* x, int k) {  // bits 9-15 of each uint16
    constexpr uint64_t kSignBits = 0xFE00FE00FE00FE00ull;
    return SignMask56(_pext_u64(U64(x->qs + 16 * k), kSignBits) |
                      (_pext_u64(U64(x->qs + 16 * k + 8), kSignBits) << 28));
  }
};

struct Iq2s : Iq2Inserted<Iq2s, gguf::BlockIQ2_S> {
  static __m256i Grid(const Block* x, int c) {
    const uint8_t* qs = x->qs + 4 * c;
    const int qh = x->qh[c];
    const auto idx = [&](int l) { return qs[l] | ((qh << (8 - 2 * l)) & 0x300); };
    const uint64_t* g = gguf::grids::kIq2sGrid;
    return _mm256_set_epi64x(G64(g, idx(3)), G64(g, idx(2)), G64(g, idx(1)), G64(g, idx(0)));
  }
  static __m256i Signs(const Block* x, int c) { return SignBits(x->qs + 32 + 4 * c); }
  REWIND_IQ_FEW_WIDE static __mmask64 SignMask(const Block* x, int k) {
    return _cvtu64_mask64(U64(x->qs + 32 + 8 * k));
  }
};

struct Iq3s : GroupScales {
  using Block = gguf::BlockIQ3_S;
  static constexpr float kFactor = 1.0f;
  static constexpr int kBits = 3, kEntries = 512;  // grid codes of the 512-bit path
  using Wide = WideGrid<Iq3s>;
  static uint8_t GridByte(int i, int j) { return static_cast<uint8_t>(gguf::grids::kIq3sGrid[i] >> (8 * j)); }
  REWIND_IQ_FEW_WIDE static __mmask64 Bit8(const Block* x) { return _cvtu64_mask64(U64(x->qh)); }
  static __m256i BlockScales(const Block* x) {  // one 4-bit s per 32 elements (nibble c % 2 of byte c / 2)
    uint32_t b;
    std::memcpy(&b, x->scales, 4);
    const __m128i v = _mm_cvtsi32_si128(static_cast<int>(b));
    const __m128i m4 = _mm_set1_epi8(0x0F);
    const __m128i s = _mm_unpacklo_epi8(_mm_and_si128(v, m4), _mm_and_si128(_mm_srli_epi16(v, 4), m4));
    const __m256i s16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(s, s));
    return _mm256_add_epi16(_mm256_slli_epi16(s16, 1), _mm256_set1_epi16(1));
  }
  REWIND_IQ_FEW_WIDE static __m512i WideScales(const Block* x) {
    return _mm512_castsi256_si512(BlockScales(x));
  }
  static __m256i Grid(const Block* x, int c) {
    const uint8_t* qs = x->qs + 8 * c;
    const int qh = x->qh[c];
    const auto g = [&](int k) {
      return static_cast<int>(gguf::grids::kIq3sGrid[qs[k] | (((qh >> k) & 1) << 8)]);
    };
    return _mm256_set_epi32(g(7), g(6), g(5), g(4), g(3), g(2), g(1), g(0));
  }
  static __m256i Signs(const Block* x, int c) { return SignBits(x->signs + 4 * c); }
  REWIND_IQ_FEW_WIDE static __mmask64 SignMask(const Block* x, int k) {
    return _cvtu64_mask64(U64(x->signs + 8 * k));
  }
};

// The decode-path kernels for 1 to 3 tokens of the grid types (wide: the caller checked AVX-512 BW/VBMI and
// BMI2); false (nothing written) for other types and token counts.
inline bool RowsFew(gguf::TensorType t, int64_t nb, const uint8_t* w, size_t w_stride, int64_t n_rows,
                    const uint8_t* const* act, int n_tok, float* out, int64_t out_stride, bool wide) {
  using TT = gguf::TensorType;
  switch (t) {
    case TT::kIQ2_XXS:
      return RowsOf<Iq2xxs>(nb, w, w_stride, n_rows, act, n_tok, out, out_stride, wide);
    case TT::kIQ3_XXS:
      return RowsOf<Iq3xxs>(nb, w, w_stride, n_rows, act, n_tok, out, out_stride, wide);
    case TT::kIQ2_XS:
      return RowsOf<Iq2xs>(nb, w, w_stride, n_rows, act, n_tok, out, out_stride, wide);
    case TT::kIQ2_S:
      return RowsOf<Iq2s>(nb, w, w_stride, n_rows, act, n_tok, out, out_stride, wide);
    case TT::kIQ3_S:
      return RowsOf<Iq3s>(nb, w, w_stride, n_rows, act, n_tok, out, out_stride, wide);
    case TT::kIQ1_S:
      return Iq1RowsOf<Iq1s, Iq1sWide>(nb, w, w_stride, n_rows, act, n_tok, out, out_stride, wide);
    case TT::kIQ1_M:
      return Iq1RowsOf<Iq1m, Iq1mWide>(nb, w, w_stride, n_rows, act, n_tok, out, out_stride, wide);
    default:
      return false;
  }
}

}  // namespace rw::kernels::lowbit_avx2::iq_few
