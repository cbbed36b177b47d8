// Internal to lowbit_avx2.cc: the decode-path kernels (1 to 3 tokens) of IQ2_XXS and IQ3_XXS, which look the
// grid entries up in registers right before their products instead of decoding each block through the buffer
// of the batch kernels. The grids hold magnitudes (unsigned bytes), so the stored signs go onto the
// activations: maddubs(|q|, +-a) gives the exact int16 pair sums (|q| <= 62, |a| <= 127), madd with the
// chunk's scale 2 ls + 1 their int32 lanes (chunk c, lane l: elements 32 c + 4 l .. + 3, the lanes of
// gguf::DotLowbitRef), and the block's float operations are the twin's: the bits of gguf::DotLowbitRef.
// Tokens holding a -128 activation (which cannot be negated in int8) get their results from the twin instead
// (lowbit_avx2.cc's GemmRows overwrites them).
//
// AVX2: the 7 stored sign bits of each 8 elements (plus the parity bit) come from a 128-entry table of +-1
// bytes for vpsignb, the grid entries are inserted one by one. AVX-512 (GemmRows' `wide`; the caller also
// checked BMI2 and VBMI): two chunks per 512-bit register; the 56 sign bits of a chunk pair spread into the
// low 7 bits of 8 bytes by one pdep, each byte's parity into its bit 7, give the mask of a masked negation;
// the grids are held as 16-bit codes of 2 or 3 bits per element in 8 registers, looked up for all 64 index
// bytes of a block by vpermt2b, then each chunk pair's codes are gathered into qwords (vpermt2b), their
// fields cut out (vpmultishiftqb) and mapped to magnitudes (vpshufb). (Grid entries by vpgatherqq /
// vpgatherdd were slower on Zen 4 than inserting them one by one: IQ2_XXS 2.8 vs 5.5 GB/s; the codes give 8-9
// GB/s.)
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "base/check.h"
#include "gguf/quant_grids.h"
#include "gguf/quants.h"
#include "kernels/avx2_blocks.h"

namespace rw::kernels::lowbit_avx2::iq_few {

inline uint32_t U32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline uint64_t U64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

// SignsWithParity(i) as 8 bytes of +1 / -1 (vpsignb operands).
struct SignBytes {
  uint64_t m[128];
  constexpr SignBytes() : m() {
    for (uint32_t i = 0; i < 128; ++i)
      for (int j = 0; j < 8; ++j)
        m[i] |= uint64_t{((gguf::grids::SignsWithParity(i) >> j) & 1) ? 0xFFu : 0x01u} << (8 * j);
  }
};
inline constexpr SignBytes kSignBytes;

inline int64_t S64(uint32_t seven) { return static_cast<int64_t>(kSignBytes.m[seven & 127]); }

// ---- AVX-512 helpers ---------------------------------------------------------------------------------

#define REWIND_IQ_FEW_WIDE \
  __attribute__((target("avx2,fma,f16c,bmi2,avx512f,avx512dq,avx512bw,avx512vl,avx512vbmi")))
// GCC 12's AVX-512 headers start broadcasts from _mm512_undefined_*(), which -Wmaybe-uninitialized flags.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

// 8 x 7 sign bits (from bit 0) -> the 64-bit mask of negative elements (each byte's eighth bit: the parity).
REWIND_IQ_FEW_WIDE inline __mmask64 SignMask56(uint64_t bits) {
  const uint64_t x = _pdep_u64(bits, 0x7F7F7F7F7F7F7F7Full);
  uint64_t p = x ^ (x >> 4);  // bit 0 of each byte: the parity of that byte's bits
  p ^= p >> 2;
  p ^= p >> 1;
  return _cvtu64_mask64(x | ((p & 0x0101010101010101ull) << 7));
}
// The 2 x 28 sign bits of a chunk pair (bits 0-27 of each aux word).
REWIND_IQ_FEW_WIDE inline __mmask64 SignMask64(uint32_t aux0, uint32_t aux1) {
  return SignMask56((aux0 & 0x0FFFFFFFu) | (static_cast<uint64_t>(aux1) << 28));
}

// Per type (the interface of the kernels below): Grid(x, c), the magnitudes of chunk c (32 elements); AVX2:
// Signs(x, c), +-1 bytes, and ChunkScale(x, BlockScales(x), c), the int16 scale of each 16 elements; AVX-512:
// SignMask(x, k), the negative elements of chunks 2k, 2k + 1, WideScale(WideScales(x), k) their scales, and
// Wide, the grid lookup of a chunk pair (Look(x) once per block, then Pair(looked, k)).
template <class Iq>
struct WideGrid;

// IQ2_XXS / IQ3_XXS: the aux word of chunk c (at qs + kAux0 + kAuxStride c) holds its sign bits (4 x 7 from
// bit 0) and its 4-bit scale s (bits 28-31; the scale is 2 s + 1).
template <class B, int kAux0, int kAuxStride>
struct Xxs {
  using Block = B;
  static uint32_t Aux(const Block* x, int c) { return U32(x->qs + kAux0 + kAuxStride * c); }
  static __m256i BlockScales(const Block*) { return _mm256_setzero_si256(); }
  static __m256i Signs(const Block* x, int c) {
    const uint32_t aux = Aux(x, c);
    return _mm256_set_epi64x(S64(aux >> 21), S64(aux >> 14), S64(aux >> 7), S64(aux));
  }
  static __m256i ChunkScale(const Block* x, __m256i, int c) {
    return _mm256_set1_epi16(static_cast<short>(2 * (Aux(x, c) >> 28) + 1));
  }
  REWIND_IQ_FEW_WIDE static __mmask64 SignMask(const Block* x, int k) {
    return SignMask64(Aux(x, 2 * k), Aux(x, 2 * k + 1));
  }
  // 2 s + 1 in both int16 halves of int32 lane (kAux0 % 64 + kAuxStride c) / 4: the aux words, shifted.
  REWIND_IQ_FEW_WIDE static __m512i WideScales(const Block* x) {
    const __m512i aux =
        kAux0 < 64
            ? _mm512_loadu_si512(x->qs)
            : _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x->qs + kAux0)));
    const __m512i sc =
        _mm512_or_si512(_mm512_slli_epi32(_mm512_srli_epi32(aux, 28), 1), _mm512_set1_epi32(1));
    return _mm512_or_si512(sc, _mm512_slli_epi32(sc, 16));
  }
  REWIND_IQ_FEW_WIDE static __m512i WideScale(__m512i sc, int k) {
    const int lo = (kAux0 % 64 + kAuxStride * 2 * k) / 4, hi = (kAux0 % 64 + kAuxStride * (2 * k + 1)) / 4;
    return _mm512_permutexvar_epi32(
        _mm512_setr_epi32(lo, lo, lo, lo, lo, lo, lo, lo, hi, hi, hi, hi, hi, hi, hi, hi), sc);
  }
};

struct Iq2xxs : Xxs<gguf::BlockIQ2_XXS, 4, 8> {
  static constexpr float kFactor = 0.125f;
  static constexpr int kBits = 2, kEntries = 256;  // grid codes of the 512-bit path
  using Wide = WideGrid<Iq2xxs>;
  static uint8_t GridByte(int i, int j) {
    return static_cast<uint8_t>(gguf::grids::kIq2xxsGrid[i] >> (8 * j));
  }
  static __m256i Grid(const Block* x, int c) {
    const uint8_t* idx = x->qs + 8 * c;
    const uint64_t* g = gguf::grids::kIq2xxsGrid;
    return _mm256_set_epi64x(static_cast<int64_t>(g[idx[3]]), static_cast<int64_t>(g[idx[2]]),
                             static_cast<int64_t>(g[idx[1]]), static_cast<int64_t>(g[idx[0]]));
  }
};

struct Iq3xxs : Xxs<gguf::BlockIQ3_XXS, 64, 4> {
  static constexpr float kFactor = 0.25f;
  static constexpr int kBits = 3, kEntries = 256;
  using Wide = WideGrid<Iq3xxs>;
  static uint8_t GridByte(int i, int j) {
    return static_cast<uint8_t>(gguf::grids::kIq3xxsGrid[i] >> (8 * j));
  }
  static __m256i Grid(const Block* x, int c) {
    const uint8_t* idx = x->qs + 8 * c;
    const uint32_t* g = gguf::grids::kIq3xxsGrid;
    const auto e = [&](int k) { return static_cast<int>(g[idx[k]]); };
    return _mm256_set_epi32(e(7), e(6), e(5), e(4), e(3), e(2), e(1), e(0));
  }
};

// The grids as 16-bit codes (IQ2_XXS: 8 x 2 bits; IQ3_XXS, IQ3_S: 4 x 3 bits; element j's field at bits
// kBits * j) of positions in their table of distinct magnitudes, split into low and high byte planes for
// vpermt2b.
struct GridCodes {
  alignas(64) uint8_t lo[512];
  alignas(64) uint8_t hi[512];
  alignas(16) uint8_t values[16];  // the distinct magnitudes, ascending
};

template <class Iq>
const GridCodes& Codes() {
  static const GridCodes codes = [] {
    GridCodes c{};
    int n_values = 0;
    constexpr int kPerEntry = 16 / Iq::kBits;
    for (int v = 1; v < 256; ++v)  // ascending distinct values
      for (int i = 0; i < Iq::kEntries; ++i)
        for (int j = 0; j < kPerEntry; ++j)
          if (Iq::GridByte(i, j) == v && (n_values == 0 || c.values[n_values - 1] != v))
            c.values[n_values++] = v;
    REWIND_CHECK(n_values == (1 << Iq::kBits) - (Iq::kBits == 2 ? 1 : 0));
    for (int i = 0; i < Iq::kEntries; ++i) {
      uint32_t code = 0;
      for (int j = 0; j < kPerEntry; ++j) {
        uint32_t k = 0;
        while (c.values[k] != Iq::GridByte(i, j)) ++k;
        code |= k << (Iq::kBits * j);
      }
      c.lo[i] = static_cast<uint8_t>(code);
      c.hi[i] = static_cast<uint8_t>(code >> 8);
    }
    return c;
  }();
  return codes;
}

// A 256-byte table looked up at the 64 bytes of idx (two vpermt2b, bit 7 picks between them).
struct Plane {
  __m512i t[4];
  REWIND_IQ_FEW_WIDE explicit Plane(const uint8_t* p) {
    for (int k = 0; k < 4; ++k) t[k] = _mm512_load_si512(p + 64 * k);
  }
  REWIND_IQ_FEW_WIDE __m512i operator()(__m512i idx, __mmask64 high) const {
    return _mm512_mask_blend_epi8(high, _mm512_permutex2var_epi8(t[0], idx, t[1]),
                                  _mm512_permutex2var_epi8(t[2], idx, t[3]));
  }
};

// vpermt2b patterns (into lo: 0-63, hi: 64-127) that gather the codes of chunks 2k, 2k + 1 into qwords, and
// the vpmultishiftqb bit offsets of each element's field within its qword. IQ2_XXS: qword m = the code of
// entry m (qs byte 8 ib + m % 4, ib = 2k + m / 4); IQ3_XXS, IQ3_S: qword m = the codes of entries 2m, 2m + 1 (qs
// bytes 16 k + 2m, + 1) at bits 0 and 16.
template <class Iq>
struct Patterns {
  alignas(64) uint8_t gather[4][64];
  alignas(64) uint8_t shifts[64];
  constexpr Patterns() : gather(), shifts() {
    for (int k = 0; k < 4; ++k)
      for (int m = 0; m < 8; ++m) {
        for (int e = 0; e < (Iq::kBits == 2 ? 1 : 2); ++e) {
          const int pos = Iq::kBits == 2 ? 8 * (2 * k + m / 4) + m % 4 : 16 * k + 2 * m + e;
          gather[k][8 * m + 2 * e] = static_cast<uint8_t>(pos);
          gather[k][8 * m + 2 * e + 1] = static_cast<uint8_t>(64 + pos);
        }
      }
    for (int m = 0; m < 8; ++m)
      for (int j = 0; j < 8; ++j)
        shifts[8 * m + j] = static_cast<uint8_t>(Iq::kBits == 2 ? 2 * j : 16 * (j / 4) + 3 * (j % 4));
  }
};

// The magnitudes of a block's chunk pairs from its index bytes, with the tables in registers (IQ3_S: 512
// entries, the ninth index bit from Iq::Bit8).
template <class Iq>
struct WideGrid {
  static constexpr Patterns<Iq> kPatterns{};
  static constexpr bool k512 = Iq::kEntries == 512;
  Plane lo, hi, lo1, hi1;
  __m512i values, field_mask, shifts;
  REWIND_IQ_FEW_WIDE WideGrid()
      : lo(Codes<Iq>().lo),
        hi(Codes<Iq>().hi),
        lo1(Codes<Iq>().lo + (k512 ? 256 : 0)),
        hi1(Codes<Iq>().hi + (k512 ? 256 : 0)),
        values(_mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(Codes<Iq>().values)))),
        field_mask(_mm512_set1_epi8((1 << Iq::kBits) - 1)),
        shifts(_mm512_load_si512(kPatterns.shifts)) {}
  // The low and high code bytes of a block's 64 index bytes (IQ2_XXS: also its sign words, unused).
  struct Looked {
    __m512i lo, hi;
  };
  REWIND_IQ_FEW_WIDE Looked Look(const typename Iq::Block* x) const {
    const __m512i idx = _mm512_loadu_si512(x->qs);
    const __mmask64 high = _mm512_movepi8_mask(idx);
    if constexpr (k512) {
      const __mmask64 bit8 = Iq::Bit8(x);
      return {_mm512_mask_blend_epi8(bit8, lo(idx, high), lo1(idx, high)),
              _mm512_mask_blend_epi8(bit8, hi(idx, high), hi1(idx, high))};
    }
    return {lo(idx, high), hi(idx, high)};
  }
  REWIND_IQ_FEW_WIDE __m512i Pair(const Looked& b, int k) const {
    const __m512i codes = _mm512_permutex2var_epi8(b.lo, _mm512_load_si512(kPatterns.gather[k]), b.hi);
    const __m512i fields = _mm512_and_si512(_mm512_multishift_epi64_epi8(shifts, codes), field_mask);
    return _mm512_shuffle_epi8(values, fields);
  }
};

// The loop pieces of both kernels: a row's block i (prefetching ahead) and the tokens' Q8_K blocks i, the
// block's float operations (the twin's: the int32 lanes times (d * factor) * d_act into 8 float lanes) and
// the final sums.
template <class Iq, int T>
inline const typename Iq::Block* BlockAt(const uint8_t* row, int64_t i, const uint8_t* const* act,
                                         const gguf::BlockQ8_K** y) {
  const auto* x = reinterpret_cast<const typename Iq::Block*>(row) + i;
  _mm_prefetch(reinterpret_cast<const char*>(x + 4), _MM_HINT_T0);
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) y[t] = reinterpret_cast<const gguf::BlockQ8_K*>(act[t]) + i;
  return x;
}
template <int T>
inline void AddBlock(float dw, const gguf::BlockQ8_K* const* y, const __m256i* sumi, __m256* acc) {
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t)
    acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dw * y[t]->d), _mm256_cvtepi32_ps(sumi[t]), acc[t]);
}
template <int T>
inline void StoreSums(const __m256* acc, float* out, int64_t out_stride) {
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) out[t * out_stride] = avx2_blocks::Hsum(acc[t]);
}

// n_rows weight rows (nb blocks each, w_stride bytes apart) against T tokens (act[t]: Q8_K blocks):
// out[t * out_stride + r]; block_sums(x, y, sumi) adds block x's int32 lanes with the tokens' blocks y into
// sumi and returns the block's d * factor.
template <class Iq, int T, class BlockSums>
inline void RowsBy(int64_t nb, const uint8_t* w, size_t w_stride, int64_t n_rows, const uint8_t* const* act,
                   float* out, int64_t out_stride, BlockSums block_sums) {
  for (int64_t r = 0; r < n_rows; ++r) {
    __m256 acc[T] = {};
    for (int64_t i = 0; i < nb; ++i) {
      const gguf::BlockQ8_K* y[T];
      const auto* x = BlockAt<Iq, T>(w + r * w_stride, i, act, y);
      __m256i sumi[T] = {};
      const float dw = block_sums(x, y, sumi);
      AddBlock<T>(dw, y, sumi, acc);
    }
    StoreSums<T>(acc, out + r, out_stride);
  }
}

template <class Iq, int T>
void Rows(int64_t nb, const uint8_t* w, size_t w_stride, int64_t n_rows, const uint8_t* const* act,
          float* out, int64_t out_stride) {
  RowsBy<Iq, T>(nb, w, w_stride, n_rows, act, out, out_stride,
                [](const typename Iq::Block* x, const gguf::BlockQ8_K* const* y, __m256i* sumi) {
                  const __m256i sc = Iq::BlockScales(x);
#pragma GCC unroll 8
                  for (int c = 0; c < 8; ++c) {
                    const __m256i q = Iq::Grid(x, c), s = Iq::Signs(x, c), scale = Iq::ChunkScale(x, sc, c);
#pragma GCC unroll 4
                    for (int t = 0; t < T; ++t) {
                      const __m256i a = _mm256_sign_epi8(avx2_blocks::Load256(y[t]->qs + 32 * c), s);
                      sumi[t] = _mm256_add_epi32(sumi[t], _mm256_madd_epi16(_mm256_maddubs_epi16(q, a), scale));
                    }
                  }
                  return avx2_blocks::H2F(x->d) * Iq::kFactor;
                });
}

template <class Iq, int T>
REWIND_IQ_FEW_WIDE void RowsWide(int64_t nb, const uint8_t* w, size_t w_stride, int64_t n_rows,
                                 const uint8_t* const* act, float* out, int64_t out_stride) {
  const __m512i zero = _mm512_setzero_si512();
  const typename Iq::Wide grid;
  for (int64_t r = 0; r < n_rows; ++r) {
    __m256 acc[T] = {};
    for (int64_t i = 0; i < nb; ++i) {
      const gguf::BlockQ8_K* y[T];
      const auto* x = BlockAt<Iq, T>(w + r * w_stride, i, act, y);
      __m512i sumi[T] = {};
      const auto looked = grid.Look(x);
      const __m512i sc = Iq::WideScales(x);
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        const __m512i q = grid.Pair(looked, k), scale = Iq::WideScale(sc, k);
        const __mmask64 neg = Iq::SignMask(x, k);
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          const __m512i a = _mm512_loadu_si512(y[t]->qs + 64 * k);
          const __m512i sa = _mm512_mask_sub_epi8(a, neg, zero, a);
          sumi[t] = _mm512_add_epi32(sumi[t], _mm512_madd_epi16(_mm512_maddubs_epi16(q, sa), scale));
        }
      }
      __m256i s8[T];  // the two chunks' lanes folded: the twin's 8 int32 lanes (exact)
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t)
        s8[t] = _mm256_add_epi32(_mm512_castsi512_si256(sumi[t]), _mm512_extracti64x4_epi64(sumi[t], 1));
      AddBlock<T>(avx2_blocks::H2F(x->d) * Iq::kFactor, y, s8, acc);
    }
    StoreSums<T>(acc, out + r, out_stride);
  }
}
#pragma GCC diagnostic pop

// Calls run.template operator()<T>() with T = n_tok for 1 to 3 tokens; false (nothing run) for other counts.
template <class Run>
bool ForFewTokens(int n_tok, const Run& run) {
  switch (n_tok) {
    case 1:
      run.template operator()<1>();
      return true;
    case 2:
      run.template operator()<2>();
      return true;
    case 3:
      run.template operator()<3>();
      return true;
    default:
      return false;
  }
}

// The kernels above for 1 to 3 tokens (wide: the caller checked AVX-512 BW/VBMI and BMI2); false (nothing
// written) for other token counts.
template <class Iq>
bool RowsOf(int64_t nb, const uint8_t* w, size_t w_stride, int64_t n_rows, const uint8_t* const* act,
            int n_tok, float* out, int64_t out_stride, bool wide) {
  const auto run = [&]<int T>() {
    if (wide) return RowsWide<Iq, T>(nb, w, w_stride, n_rows, act, out, out_stride);
    Rows<Iq, T>(nb, w, w_stride, n_rows, act, out, out_stride);
  };
  return ForFewTokens(n_tok, run);
}

}  // namespace rw::kernels::lowbit_avx2::iq_few
