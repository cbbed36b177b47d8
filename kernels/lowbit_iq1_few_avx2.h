// Internal to lowbit_avx2.cc: the decode-path kernels (1 to 3 tokens) of IQ1_S and IQ1_M, which build each
// 32-element chunk's values q = 8 g + delta (g in {-1, 0, 1} from the 2048-entry grid, delta +-1 per chunk for
// IQ1_S, per 8 elements for IQ1_M) in a register right before its products instead of decoding the block
// through the buffer of the batch kernels. Same products as the twin's (maddubs(|q|, sign(a, q)), q never 0),
// the same int32 lanes (chunk c, lane l: elements 32 c + 4 l .. + 3 times the scale 2 s + 1 of their 16) and
// the same float operations per block (lowbit_iq_few_avx2.h's AddBlock): the bits of gguf::DotLowbitRef.
// Tokens holding a -128 activation get their results from the twin (lowbit_avx2.cc's GemmRows).
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "gguf/quant_grids.h"
#include "gguf/quants.h"
#include "kernels/avx2_blocks.h"
#include "kernels/lowbit_iq1_wide.h"
#include "kernels/lowbit_iq_few_avx2.h"

namespace rw::kernels::lowbit_avx2::iq_few {

// 8 g + delta from the grid bytes g and the delta bytes (+-1).
inline __m256i Iq1Values(__m256i g, __m256i delta) {
  return _mm256_add_epi8(_mm256_sign_epi8(_mm256_set1_epi8(8), g), delta);
}
inline int64_t Iq1Entry(int idx) { return static_cast<int64_t>(gguf::grids::kIq1sGrid[idx]); }
inline int64_t Iq1Delta(bool minus) { return minus ? -1 : 0x0101010101010101; }

// Per type: Prepare(x), what the block's chunks share; Values(x, p, c), chunk c's q; Scale(p, c), the int16
// scales of its 16-element halves; D(x), the block's float scale.
// The block's 32 grid indices (qs byte | 3 high bits << 8) as uint16, 16 at a time: half n holds chunks 4n ..
// 4n + 3, entry l of a chunk at word 4 (chunk % 4) + l; hi3 (int16 lanes) has the high bits already at bits 8-10.
inline void StoreIndices(const uint8_t* qs, __m256i hi3, uint16_t* idx) {
  const __m256i lo = _mm256_cvtepu8_epi16(avx2_blocks::Load128(qs));
  _mm256_store_si256(reinterpret_cast<__m256i*>(idx),
                     _mm256_or_si256(lo, _mm256_and_si256(hi3, _mm256_set1_epi16(0x700))));
}

struct Iq1s {
  using Block = gguf::BlockIQ1_S;
  struct Prepared {
    alignas(32) uint16_t idx[32];
    uint16_t qh[8];
  };
  // Entry l's high bits: bits 3 l .. 3 l + 2 of its chunk's qh word.
  static Prepared Prepare(const Block* x) {
    Prepared p;
    std::memcpy(p.qh, x->qh, 16);
    const __m256i mult = _mm256_setr_epi16(256, 32, 4, 1, 256, 32, 4, 1, 256, 32, 4, 1, 256, 32, 4, 1);
    // each chunk's word 4 times: lane L of half n holds chunks 4n + 2L, 4n + 2L + 1
    const __m256i spread = _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3, 4, 5, 4, 5, 4, 5, 4,
                                            5, 6, 7, 6, 7, 6, 7, 6, 7);
#pragma GCC unroll 2
    for (int n = 0; n < 2; ++n) {
      const __m256i words = _mm256_shuffle_epi8(
          _mm256_broadcastq_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(x->qh + 8 * n))), spread);
      const __m256i hi3 = _mm256_blend_epi16(_mm256_mullo_epi16(words, mult), _mm256_srli_epi16(words, 1), 0x88);
      StoreIndices(x->qs + 16 * n, hi3, p.idx + 16 * n);
    }
    return p;
  }
  static __m256i Values(const Block*, const Prepared& p, int c) {
    const uint16_t* idx = p.idx + 4 * c;
    const __m256i g = _mm256_set_epi64x(Iq1Entry(idx[3]), Iq1Entry(idx[2]), Iq1Entry(idx[1]), Iq1Entry(idx[0]));
    return Iq1Values(g, _mm256_set1_epi64x(Iq1Delta(p.qh[c] & 0x8000)));
  }
  static __m256i Scale(const Prepared& p, int c) {
    return _mm256_set1_epi16(static_cast<short>(2 * ((p.qh[c] >> 12) & 7) + 1));
  }
  static float D(const Block* x, const Prepared&) { return avx2_blocks::H2F(x->d); }
};

struct Iq1m {
  using Block = gguf::BlockIQ1_M;
  struct Prepared {
    alignas(32) uint16_t idx[32];
    uint16_t sc[4];
    __m256i scales;  // the 16 int16 scales 2 s + 1 (group k: bits 3 (k % 4) of sc[k / 4])
    __m256i qh;      // the 16 qh bytes in both 128-bit lanes
  };
  static Prepared Prepare(const Block* x) {
    Prepared p;
    std::memcpy(p.sc, x->scales, 8);
    // word k / 4 four times, shifted so that field k % 4 lands at bits 9-11
    const __m256i words = _mm256_shuffle_epi8(
        _mm256_broadcastq_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(x->scales))),
        _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3, 4, 5, 4, 5, 4, 5, 4, 5, 6, 7, 6, 7, 6, 7, 6,
                         7));
    const __m256i at9 = _mm256_mullo_epi16(words, _mm256_setr_epi16(512, 64, 8, 1, 512, 64, 8, 1, 512, 64, 8, 1,
                                                                      512, 64, 8, 1));
    const __m256i b = _mm256_and_si256(_mm256_srli_epi16(at9, 9), _mm256_set1_epi16(7));
    p.scales = _mm256_add_epi16(_mm256_add_epi16(b, b), _mm256_set1_epi16(1));
    // entry j of half n: the high bits in nibble j % 2 of qh byte 8 n + j / 2
    const __m256i mult = _mm256_setr_epi16(256, 16, 256, 16, 256, 16, 256, 16, 256, 16, 256, 16, 256, 16, 256, 16);
#pragma GCC unroll 2
    for (int n = 0; n < 2; ++n) {
      const __m128i h = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(x->qh + 8 * n));
      const __m256i hi3 = _mm256_mullo_epi16(_mm256_cvtepu8_epi16(_mm_unpacklo_epi8(h, h)), mult);
      StoreIndices(x->qs + 16 * n, hi3, p.idx + 16 * n);
    }
    p.qh = _mm256_broadcastsi128_si256(avx2_blocks::Load128(x->qh));
    return p;
  }
  static __m256i Values(const Block*, const Prepared& p, int c) {
    const uint16_t* idx = p.idx + 4 * c;
    const __m256i g = _mm256_set_epi64x(Iq1Entry(idx[3]), Iq1Entry(idx[2]), Iq1Entry(idx[1]), Iq1Entry(idx[0]));
    // entry l's delta bit: bit 3 + 4 (l % 2) of qh byte 2 c + l / 2
    const __m256i bytes = _mm256_shuffle_epi8(
        p.qh, _mm256_setr_epi8(2 * c, 2 * c, 2 * c, 2 * c, 2 * c, 2 * c, 2 * c, 2 * c, 2 * c, 2 * c, 2 * c, 2 * c,
                               2 * c, 2 * c, 2 * c, 2 * c, 2 * c + 1, 2 * c + 1, 2 * c + 1, 2 * c + 1, 2 * c + 1,
                               2 * c + 1, 2 * c + 1, 2 * c + 1, 2 * c + 1, 2 * c + 1, 2 * c + 1, 2 * c + 1,
                               2 * c + 1, 2 * c + 1, 2 * c + 1, 2 * c + 1));
    const __m256i bit = _mm256_setr_epi64x(0x0808080808080808, static_cast<int64_t>(0x8080808080808080ull),
                                           0x0808080808080808, static_cast<int64_t>(0x8080808080808080ull));
    const __m256i minus = _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit);
    return Iq1Values(g, _mm256_or_si256(minus, _mm256_set1_epi8(1)));
  }
  // Groups 2c (low 128-bit lane) and 2c + 1 (high lane).
  static __m256i Scale(const Prepared& p, int c) {
    const __m256i pair = _mm256_permutevar8x32_epi32(p.scales, _mm256_set1_epi32(c));
    return _mm256_shuffle_epi8(pair, _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3,
                                                      2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3));
  }
  static float D(const Block*, const Prepared& p) {
    const uint16_t* sc = p.sc;
    return avx2_blocks::H2F(static_cast<uint16_t>((sc[0] >> 12) | ((sc[1] >> 8) & 0x00F0) |
                                                  ((sc[2] >> 4) & 0x0F00) | (sc[3] & 0xF000)));
  }
};

// n_rows weight rows against T tokens: out[t * out_stride + r] (lowbit_iq_few_avx2.h's RowsBy).
template <class Iq, int T>
void Iq1Rows(int64_t nb, const uint8_t* w, size_t w_stride, int64_t n_rows, const uint8_t* const* act,
             float* out, int64_t out_stride) {
  RowsBy<Iq, T>(nb, w, w_stride, n_rows, act, out, out_stride,
                [](const typename Iq::Block* x, const gguf::BlockQ8_K* const* y, __m256i* sumi) {
                  const typename Iq::Prepared p = Iq::Prepare(x);
#pragma GCC unroll 8
                  for (int c = 0; c < 8; ++c) {
                    const __m256i q = Iq::Values(x, p, c), aq = _mm256_sign_epi8(q, q), scale = Iq::Scale(p, c);
#pragma GCC unroll 4
                    for (int t = 0; t < T; ++t) {
                      const __m256i a = _mm256_sign_epi8(avx2_blocks::Load256(y[t]->qs + 32 * c), q);
                      sumi[t] = _mm256_add_epi32(sumi[t], _mm256_madd_epi16(_mm256_maddubs_epi16(aq, a), scale));
                    }
                  }
                  return Iq::D(x, p) * 0.125f;
                });
}

// The kernel above, or lowbit_iq1_wide.h's (wide: the caller checked AVX-512 BW/VNNI/VBMI and BMI2), for 1
// to 3 tokens; false (nothing written) for other token counts.
template <class Iq, class IqWide>
bool Iq1RowsOf(int64_t nb, const uint8_t* w, size_t w_stride, int64_t n_rows, const uint8_t* const* act,
               int n_tok, float* out, int64_t out_stride, bool wide) {
  const auto run = [&]<int T>() {
    if (wide) return Iq1RowsWide<IqWide, T>(nb, w, w_stride, n_rows, act, out, out_stride);
    Iq1Rows<Iq, T>(nb, w, w_stride, n_rows, act, out, out_stride);
  };
  return ForFewTokens(n_tok, run);
}

}  // namespace rw::kernels::lowbit_avx2::iq_few
