// Internal to lowbit_avx2.cc: the 512-bit decode-path kernels (1 to 3 tokens) of IQ1_S and IQ1_M (GemmRows'
// `wide`; the caller also checked BMI2 and VBMI). The chunk values q = 8 g + delta (g in {-1, 0, 1}) are split
// into their grid part and their delta part, so that neither needs a sign trick per token:
//   sum_j q_j a_j = 8 sum_j (g_j + 1) a_j + (delta - 8) A,   A = sum_j a_j (the 4 elements of an int32 lane).
// The grid entries come from a table of 8 (g + 1) (unsigned bytes 0, 8, 16), two chunks per 512-bit register,
// vpmaddubsw with the activations gives exact int16 pair sums (|sum| <= 2 * 16 * 128) and vpdpwssd with the
// scale 2 s + 1 of each 16 elements their int32 lanes; the lane sums A of every token are made once per call
// (vpdpbusd with ones), packed two chunks per int32 lane as int16, and two vpdpwssd per block add A times
// (2 s + 1) (delta - 8). The grid indices go to general registers four at a time (vmovq / vpextrq and shifts:
// 32 vpextrw per block cost more than the products) for scalar-indexed loads of the table entries. All integer sums are exact, so after folding the two chunks of a register the
// 8 int32 lanes of a block are the twin's (chunk c, lane l: elements 32 c + 4 l .. + 3 times their scale), and
// the block's float operations are lowbit_iq_few_avx2.h's AddBlock: the bits of gguf::DotLowbitRef, also for
// -128 activations (nothing is negated).
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "gguf/quant_grids.h"
#include "gguf/quants.h"
#include "kernels/avx2_blocks.h"
#include "kernels/lowbit_iq_few_avx2.h"

namespace rw::kernels::lowbit_avx2::iq_few {

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

// The IQ1 grid as 8 (g + 1) per byte.
inline const uint64_t* Iq1Grid8() {
  static const std::vector<uint64_t> grid = [] {
    std::vector<uint64_t> g(2048);
    for (int i = 0; i < 2048; ++i)
      for (int j = 0; j < 8; ++j) {
        const auto v = static_cast<int8_t>(gguf::grids::kIq1sGrid[i] >> (8 * j));
        g[i] |= static_cast<uint64_t>(8 * (v + 1)) << (8 * j);
      }
    return g;
  }();
  return grid.data();
}

// Word patterns. Register k (chunks 2k, 2k + 1) word w: group 4k + w / 8. Packed register k (k = 0, 1) int32
// lane j: word 2j chunk c = 2k + j / 8, word 2j + 1 chunk c + 4, both lane l = j % 8 (group 2c + l / 4).
struct Iq1Patterns {
  alignas(64) uint16_t group[4][32];   // register k: the group of word w
  alignas(64) uint16_t pgroup[2][32];  // packed k: the group of word w
  alignas(64) uint8_t pbyte[2][64];    // packed k: IQ1_M's qh byte of the delta bit of word w (both bytes)
  alignas(64) uint16_t pbit[2][32];    // ... and that bit
  alignas(64) uint16_t half[32], quarter[32], left[32];  // w / 2, w / 4, IQ1_S's shifts {8, 5, 2, 0}
  constexpr Iq1Patterns() : group(), pgroup(), pbyte(), pbit(), half(), quarter(), left() {
    for (int w = 0; w < 32; ++w) {
      half[w] = static_cast<uint16_t>(w / 2);
      quarter[w] = static_cast<uint16_t>(w / 4);
      left[w] = static_cast<uint16_t>(w % 4 == 3 ? 0 : 8 - 3 * (w % 4));
    }
    for (int k = 0; k < 4; ++k)
      for (int w = 0; w < 32; ++w) group[k][w] = static_cast<uint16_t>(4 * k + w / 8);
    for (int k = 0; k < 2; ++k)
      for (int w = 0; w < 32; ++w) {
        const int j = w / 2, c = 2 * k + j / 8 + 4 * (w % 2), l = j % 8;
        pgroup[k][w] = static_cast<uint16_t>(2 * c + l / 4);
        // IQ1_M: part 4c + l / 2 of 8 elements: qh byte 2c + l / 4, bit 3 + 4 ((l / 2) % 2)
        pbyte[k][2 * w] = pbyte[k][2 * w + 1] = static_cast<uint8_t>(2 * c + l / 4);
        pbit[k][w] = static_cast<uint16_t>(8 << (4 * ((l / 2) % 2)));
      }
  }
};
inline constexpr Iq1Patterns kIq1Patterns{};

#define REWIND_IQ1_WIDE \
  __attribute__((target("avx2,fma,f16c,bmi2,avx512f,avx512dq,avx512bw,avx512vl,avx512vbmi,avx512vnni")))

inline REWIND_IQ1_WIDE __m512i Pattern(const uint16_t* p) { return _mm512_load_si512(p); }

// Per type: Indices(x), the 32 grid indices (uint16, entry 4c + l of chunk c); Scales(x), the 16 int16 group
// scales 2 s + 1 (words 0-15); Minus(x, k), packed register k's words whose delta is -1; D(x), the block's d.
struct Iq1sWide {
  using Block = gguf::BlockIQ1_S;
  static REWIND_IQ1_WIDE __m512i Qh(const Block* x) {
    return _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x->qh)));
  }
  // entry 4c + l: qs byte | bits 3l .. 3l + 2 of qh word c at bits 8-10
  static REWIND_IQ1_WIDE __m512i Indices(const Block* x) {
    const __m512i lo = _mm512_cvtepu8_epi16(avx2_blocks::Load256(x->qs));
    const __m512i words = _mm512_permutexvar_epi16(
        Pattern(kIq1Patterns.quarter),
        Qh(x));
    const __m512i left = Pattern(kIq1Patterns.left);
    const __m512i right = _mm512_set1_epi64(0x0001000000000000);
    const __m512i hi = _mm512_srlv_epi16(_mm512_sllv_epi16(words, left), right);
    return _mm512_ternarylogic_epi32(lo, hi, _mm512_set1_epi16(0x700), 0xF8);  // lo | (hi & 0x700)
  }
  // group g: chunk g / 2's scale (qh word bits 12-14)
  static REWIND_IQ1_WIDE __m512i Scales(const Block* x) {
    const __m512i words = _mm512_permutexvar_epi16(
        Pattern(kIq1Patterns.half),
        Qh(x));
    return _mm512_ternarylogic_epi32(_mm512_srli_epi16(words, 11), _mm512_set1_epi16(0xE), _mm512_set1_epi16(1),
                                     0xEA);  // (a & b) | c
  }
  // delta -1: bit 15 of the chunk's qh word
  static REWIND_IQ1_WIDE __mmask32 Minus(const Block* x, int k) {
    const uint16_t* g = kIq1Patterns.pgroup[k];  // group / 2 = chunk
    return _mm512_movepi16_mask(
        _mm512_permutexvar_epi16(_mm512_srli_epi16(Pattern(g), 1), Qh(x)));
  }
  static REWIND_IQ1_WIDE float D(const Block* x) { return avx2_blocks::H2F(x->d); }
};

struct Iq1mWide {
  using Block = gguf::BlockIQ1_M;
  // entry e: qs byte | the low 3 bits of nibble e % 2 of qh byte e / 2 at bits 8-10
  static REWIND_IQ1_WIDE __m512i Indices(const Block* x) {
    const __m512i lo = _mm512_cvtepu8_epi16(avx2_blocks::Load256(x->qs));
    const __m512i qh = _mm512_castsi256_si512(_mm256_cvtepu8_epi16(avx2_blocks::Load128(x->qh)));
    const __m512i bytes = _mm512_permutexvar_epi16(
        Pattern(kIq1Patterns.half),
        qh);
    const __m512i hi = _mm512_sllv_epi16(bytes, _mm512_set1_epi32(0x00040008));  // even e: << 8, odd: << 4
    return _mm512_ternarylogic_epi32(lo, hi, _mm512_set1_epi16(0x700), 0xF8);
  }
  // group 4k + f: bits 3f .. 3f + 2 of scale word k
  static REWIND_IQ1_WIDE __m512i Scales(const Block* x) {
    const __m512i sc = _mm512_castsi128_si512(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(x->scales)));
    const __m512i words = _mm512_permutexvar_epi16(
        Pattern(kIq1Patterns.quarter),
        sc);
    const __m512i f = _mm512_srlv_epi16(words, _mm512_set1_epi64(0x0009000600030000));
    return _mm512_ternarylogic_epi32(_mm512_slli_epi16(f, 1), _mm512_set1_epi16(0xE), _mm512_set1_epi16(1), 0xEA);
  }
  static REWIND_IQ1_WIDE __mmask32 Minus(const Block* x, int k) {
    const __m512i qh = _mm512_castsi128_si512(avx2_blocks::Load128(x->qh));
    const __m512i bytes = _mm512_permutexvar_epi8(_mm512_load_si512(kIq1Patterns.pbyte[k]), qh);
    return _mm512_test_epi16_mask(bytes, Pattern(kIq1Patterns.pbit[k]));
  }
  static REWIND_IQ1_WIDE float D(const Block* x) {
    uint16_t sc[4];
    std::memcpy(sc, x->scales, 8);
    return avx2_blocks::H2F(static_cast<uint16_t>((sc[0] >> 12) | ((sc[1] >> 8) & 0x00F0) |
                                                  ((sc[2] >> 4) & 0x0F00) | (sc[3] & 0xF000)));
  }
};

// The lane sums A of n_tok tokens' Q8_K blocks, packed: per block two registers, register k's int32 lane j
// holding (A of chunk 2k + j / 8, A of chunk 2k + 4 + j / 8), lane j % 8, as int16 (|A| <= 512).
struct alignas(64) Zmm {
  int16_t w[32];
};
REWIND_IQ1_WIDE inline const Zmm* PackedLaneSums(int64_t nb, const uint8_t* const* act, int n_tok) {
  thread_local std::vector<Zmm> buf;
  if (static_cast<int64_t>(buf.size()) < 2 * nb * n_tok) buf.resize(static_cast<size_t>(2 * nb * n_tok));
  const __m512i ones = _mm512_set1_epi8(1), zero = _mm512_setzero_si512();
  for (int t = 0; t < n_tok; ++t)
    for (int64_t i = 0; i < nb; ++i) {
      const auto* y = reinterpret_cast<const gguf::BlockQ8_K*>(act[t]) + i;
      __m512i a[4];
      for (int k = 0; k < 4; ++k) a[k] = _mm512_dpbusd_epi32(zero, ones, _mm512_loadu_si512(y->qs + 64 * k));
      for (int k = 0; k < 2; ++k)
        _mm512_store_si512(buf[(t * nb + i) * 2 + k].w, _mm512_mask_mov_epi16(a[k], 0xAAAAAAAA, _mm512_slli_epi32(a[k + 2], 16)));
    }
  return buf.data();
}

// Chunks 2k, 2k + 1 of the block: its 8 grid entries, indices 8k .. 8k + 7 (four per uint64 u0, u1).
REWIND_IQ1_WIDE inline __m512i GridPair(const uint64_t* grid, uint64_t u0, uint64_t u1) {
  const auto q = [&](uint64_t u, int e) {
    return _mm_loadl_epi64(reinterpret_cast<const __m128i*>(grid + ((u >> (16 * e)) & 0xFFFF)));
  };
  const __m128i a = _mm_unpacklo_epi64(q(u0, 0), q(u0, 1)), b = _mm_unpacklo_epi64(q(u0, 2), q(u0, 3));
  const __m128i c = _mm_unpacklo_epi64(q(u1, 0), q(u1, 1)), d = _mm_unpacklo_epi64(q(u1, 2), q(u1, 3));
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_inserti128_si256(_mm256_castsi128_si256(a), b, 1)),
                            _mm256_inserti128_si256(_mm256_castsi128_si256(c), d, 1), 1);
}

template <class Iq, int T>
REWIND_IQ1_WIDE void Iq1RowsWide(int64_t nb, const uint8_t* w, size_t w_stride, int64_t n_rows,
                                 const uint8_t* const* act, float* out, int64_t out_stride) {
  const uint64_t* grid = Iq1Grid8();
  const Zmm* lane_sums = PackedLaneSums(nb, act, T);
  const __m512i minus7 = _mm512_set1_epi16(-7), minus9 = _mm512_set1_epi16(-9);
  for (int64_t r = 0; r < n_rows; ++r) {
    __m256 acc[T] = {};
    for (int64_t i = 0; i < nb; ++i) {
      const gguf::BlockQ8_K* y[T];
      const auto* x = BlockAt<Iq, T>(w + r * w_stride, i, act, y);
      const __m512i idx = Iq::Indices(x);
      uint64_t u[8];  // the indices moved to general registers 4 at a time (not by 32 vpextrw)
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        const __m128i part = _mm512_extracti32x4_epi32(idx, k);
        u[2 * k] = static_cast<uint64_t>(_mm_cvtsi128_si64(part));
        u[2 * k + 1] = static_cast<uint64_t>(_mm_extract_epi64(part, 1));
      }
      const __m512i sc = Iq::Scales(x);
      __m512i q[4], scale[4], coef[2];
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        q[k] = GridPair(grid, u[2 * k], u[2 * k + 1]);
        scale[k] = _mm512_permutexvar_epi16(Pattern(kIq1Patterns.group[k]), sc);
      }
#pragma GCC unroll 2
      for (int k = 0; k < 2; ++k)  // (2 s + 1) (delta - 8)
        coef[k] = _mm512_mullo_epi16(_mm512_permutexvar_epi16(Pattern(kIq1Patterns.pgroup[k]), sc),
                                     _mm512_mask_mov_epi16(minus7, Iq::Minus(x, k), minus9));
      __m256i s8[T];
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        __m512i sumi = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int k = 0; k < 4; ++k)
          sumi = _mm512_dpwssd_epi32(sumi, _mm512_maddubs_epi16(q[k], _mm512_loadu_si512(y[t]->qs + 64 * k)),
                                     scale[k]);
        const Zmm* a = lane_sums + (t * nb + i) * 2;
        sumi = _mm512_dpwssd_epi32(sumi, _mm512_load_si512(a[0].w), coef[0]);
        sumi = _mm512_dpwssd_epi32(sumi, _mm512_load_si512(a[1].w), coef[1]);
        s8[t] = _mm256_add_epi32(_mm512_castsi512_si256(sumi), _mm512_extracti64x4_epi64(sumi, 1));
      }
      AddBlock<T>(Iq::D(x) * 0.125f, y, s8, acc);
    }
    StoreSums<T>(acc, out + r, out_stride);
  }
}

#pragma GCC diagnostic pop

}  // namespace rw::kernels::lowbit_avx2::iq_few
