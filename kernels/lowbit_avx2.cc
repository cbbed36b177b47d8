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

#include "base/check.h"
#include "gguf/quant_grids.h"
#include "gguf/quants_lowbit.h"
#include "kernels/avx2_blocks.h"
#include "kernels/lowbit_decode_avx2.h"
#include "kernels/lowbit_few_avx2.h"
#include "kernels/lowbit_iq_s_few_avx2.h"

namespace rw::kernels::lowbit_avx2 {
namespace {

using namespace gguf;
using namespace avx2_blocks;
using TT = TensorType;
using namespace decode;  // Unpacked, Decode*

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

// The same lanes with AVX-512 VNNI (the CPUs of `wide` have it), for the types whose values have |q| <= 63 (all
// but IQ4_XS): vpdpbusd makes each int32 lane's sum of the 4 products q * a (|sum| <= 4 * 63 * 128 fits int16),
// PackedPairDot packs the sums of registers k and k + 2 (chunks 2k, 2k + 1 and 2k + 4, 2k + 5) as int16 halves
// and one vpdpwssd applies both groups' scales: the same exact int32 after the fold, so the bits are
// DotDecoded's. kUnsigned (Q2_K, Q4_K, Q5_K: values >= 0): unsigned q times the activations; else the
// activations plus 128 (unsigned, made once per pass: BiasActivations) times the signed q, each sum started from
// -128 * the 4-sum of q (gemm_bench 3584 1024 512 / 1024 3584 512, 1 thread, against |q| * sign(a, q):
// IQ2_XXS 109 -> 120 / 114 -> 121, IQ3_XXS 106 -> 114 / 108 -> 123, Q3_K 95-113 -> 122-125 / 117 -> 128 GMAC/s).
#define REWIND_LOWBIT_VNNI \
  __attribute__((target("avx2,fma,f16c,avx512f,avx512dq,avx512bw,avx512vl,avx512vnni")))

// The int16 scales of registers k (low half) and k + 2 (high half) of a block, k = 0 or 1: the 128-bit lane L of
// register k holds group 4k + L, so lane L gets the pair (sc[4k + L], sc[4k + 8 + L]).
REWIND_LOWBIT_VNNI inline __m512i ScalePairs(__m256i sc, int k) {
  const __m128i lo = _mm256_castsi256_si128(sc), hi = _mm256_extracti128_si256(sc, 1);
  const __m128i p = _mm_unpacklo_epi16(k ? _mm_srli_si128(lo, 8) : lo, k ? _mm_srli_si128(hi, 8) : hi);
  return _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3),
                                  _mm512_castsi128_si512(p));
}

// PackedPairDot for activations made unsigned (a + 128, u_lo / u_hi) against the signed values (s_lo / s_hi): each
// vpdpbusd starts from bias = -128 * the lane's 4-sum of the values, so its lanes are the exact 4-sums of a * q.
REWIND_LOWBIT_VNNI __attribute__((always_inline)) inline __m512i BiasedPairDot(__m512i sumi, __m512i u_lo,
                                                                              __m512i s_lo, __m512i b_lo,
                                                                              __m512i u_hi, __m512i s_hi,
                                                                              __m512i b_hi, __m512i scales) {
  const __m512i lo = _mm512_dpbusd_epi32(b_lo, u_lo, s_lo);
  const __m512i hi = _mm512_dpbusd_epi32(b_hi, u_hi, s_hi);
  return _mm512_dpwssd_epi32(sumi, _mm512_mask_mov_epi16(lo, 0xAAAAAAAA, _mm512_slli_epi32(hi, 16)), scales);
}

// A token's 16 int32 lanes of a block (two halves to fold) against the decoded registers q and the scale pairs
// s0, s1. kUnsigned: q >= 0 against the activations; else q signed with its biases against the activations
// plus 128 (BiasActivations).
template <bool kUnsigned>
REWIND_LOWBIT_VNNI __attribute__((always_inline)) inline __m512i TokenLanes(const __m512i* q, const __m512i* bias,
                                                                           __m512i s0, __m512i s1,
                                                                           const BlockQ8_K* y) {
  const __m512i zero = _mm512_setzero_si512();
  __m512i a[4];
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) a[k] = _mm512_loadu_si512(y->qs + 64 * k);
  if constexpr (kUnsigned)
    return PackedPairDot(PackedPairDot(zero, q[0], a[0], q[2], a[2], s0), q[1], a[1], q[3], a[3], s1);
  return BiasedPairDot(BiasedPairDot(zero, a[0], q[0], bias[0], a[2], q[2], bias[2], s0), a[1], q[1], bias[1], a[3],
                       q[3], bias[3], s1);
}

inline __m256i Bsums(const BlockQ8_K* y) { return Load256(reinterpret_cast<const uint8_t*>(y) + offsetof(BlockQ8_K, bsums)); }

// Tokens in pairs: the float steps of token y0[p] in lanes 0-7 of acc[p], of y1[p] in lanes 8-15 (both folds by
// two shuffles and one add, the scale products dw * da and dmin * da lane-wise the scalar ones of AddBlock, then
// its FMA and FNMA lane-wise); Hsum per half at the end.
template <int P, bool kMins, bool kUnsigned, bool kQ6Start>
REWIND_LOWBIT_VNNI __attribute__((always_inline)) inline void DotDecodedVnni(const Unpacked& dec, float factor,
                                                                            const BlockQ8_K* const* y0,
                                              const BlockQ8_K* const* y1, __m512* acc) {
  __m512i q[4], bias[4];
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    q[k] = _mm512_loadu_si512(dec.q + 64 * k);
    if constexpr (!kUnsigned)
      bias[k] = _mm512_sub_epi32(_mm512_setzero_si512(),
                                 _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(-128), q[k]));
  }
  const __m512i s0 = ScalePairs(dec.sc, 0), s1 = ScalePairs(dec.sc, 1);
  const __m512 dw = _mm512_set1_ps(dec.d * factor);
#pragma GCC unroll 4
  for (int p = 0; p < P; ++p) {
    const __m512i l0 = TokenLanes<kUnsigned>(q, bias, s0, s1, y0[p]),
                  l1 = TokenLanes<kUnsigned>(q, bias, s0, s1, y1[p]);
    __m512i sumi = _mm512_add_epi32(_mm512_shuffle_i64x2(l0, l1, 0x44), _mm512_shuffle_i64x2(l0, l1, 0xEE));
    const __m512 da = PairF(y0[p]->d, y1[p]->d);
    if constexpr (kQ6Start) {  // Q6_K's -32 offset: RowsQ6_K's start value, added last (exact integers)
      const __m512i m = _mm512_madd_epi16(PairI(Bsums(y0[p]), Bsums(y1[p])), _mm512_broadcast_i64x4(dec.sc));
      sumi = _mm512_sub_epi32(sumi, _mm512_slli_epi32(m, 5));
    }
    acc[p] = _mm512_fmadd_ps(_mm512_mul_ps(dw, da), _mm512_cvtepi32_ps(sumi), acc[p]);
    if constexpr (kMins) {
      const __m512i m = _mm512_madd_epi16(PairI(Bsums(y0[p]), Bsums(y1[p])), _mm512_broadcast_i64x4(dec.mins));
      acc[p] = _mm512_fnmadd_ps(_mm512_mul_ps(_mm512_set1_ps(dec.dmin), da), _mm512_cvtepi32_ps(m), acc[p]);
    }
  }
}

// One weight row against n_tok tokens (act[t] = token t's Q8_K blocks): out[t * out_stride]. Up to 3 tokens
// (decode, short verify batches) the accumulators stay in registers; from 4 on they live in memory, where the
// independent tokens hide the latency of the load-FMA-store chains. Same operations either way.
constexpr int kMaxTok = 32;
// Tokens per pass of the 512-bit batch path over the rows: each row group is decoded once per this many tokens,
// whose activations (128 x 4 KiB at 3584 columns) stay in L2 (gemm_bench 3584 1024 512 / 1024 3584 512, 1
// thread, 32 -> 128 tokens: IQ2_XXS 93 -> 107 / 99 -> 116, IQ3_XXS 86 -> 106 / 65 -> 113, Q4_K 108 -> 113 /
// 115 -> 118 GMAC/s).
constexpr int kMaxWideTok = 128;

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

// How the 512-bit path makes a block's int32 lanes: DotDecodedWide (IQ4_XS: |q| up to 127) or DotDecodedVnni.
enum class WideDot { kSignTrick, kVnni, kVnniUnsigned, kVnniQ6 };

// T tokens against R decoded weight rows (row r's blocks at rows[r * nb]), their sums in registers:
// out[t * out_stride + r]. VNNI: tokens in pairs (an odd last token paired with itself, its second result
// dropped); the R rows share each block's activations while they are in L1.
template <int R, int T, bool kMins, WideDot kDot>
REWIND_LOWBIT_VNNI void TokensWide(const Unpacked* rows, int64_t nb, float factor, const uint8_t* const* act,
                                   float* out, int64_t out_stride) {
  if constexpr (kDot == WideDot::kSignTrick) {
    static_assert(R == 1);
    __m256 acc[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; ++i) {
      const BlockQ8_K* y[T];
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) y[t] = reinterpret_cast<const BlockQ8_K*>(act[t]) + i;
      DotDecodedWide<T, kMins>(rows[i], factor, y, acc);
    }
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) out[t * out_stride] = Hsum(acc[t]);
  } else {
    constexpr int P = (T + 1) / 2;
    __m512 acc[R][P];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int p = 0; p < P; ++p) acc[r][p] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; ++i) {
      const BlockQ8_K *y0[P], *y1[P];
#pragma GCC unroll 4
      for (int p = 0; p < P; ++p) {
        y0[p] = reinterpret_cast<const BlockQ8_K*>(act[2 * p]) + i;
        y1[p] = reinterpret_cast<const BlockQ8_K*>(act[std::min(2 * p + 1, T - 1)]) + i;
      }
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r)
        DotDecodedVnni<P, kMins, kDot != WideDot::kVnni, kDot == WideDot::kVnniQ6>(rows[r * nb + i], factor, y0, y1,
                                                                                   acc[r]);
    }
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t)
        out[t * out_stride + r] =
            Hsum(t % 2 == 0 ? _mm512_castps512_ps256(acc[r][t / 2]) : _mm512_extractf32x8_ps(acc[r][t / 2], 1));
  }
}

// R rows against 4 or more tokens: the rows decoded once (L1-sized buffer), then 8 tokens at a time.
template <DecodeFn kDecode, bool kMins, WideDot kDot, int R>
REWIND_LOWBIT_VNNI void RowsKWide(int64_t nb, size_t block_bytes, float factor, const uint8_t* w, size_t w_stride,
                                  const uint8_t* const* act, int n_tok, float* out, int64_t out_stride) {
  thread_local std::vector<Unpacked> rows;  // [R * nb]
  if (static_cast<int64_t>(rows.size()) < R * nb) rows.resize(static_cast<size_t>(R * nb));
  for (int r = 0; r < R; ++r)
    for (int64_t i = 0; i < nb; ++i) {
      _mm_prefetch(reinterpret_cast<const char*>(w + r * w_stride + (i + 4) * block_bytes), _MM_HINT_T0);
      kDecode(w + r * w_stride + i * block_bytes, &rows[r * nb + i]);
    }
  int t = 0;
  for (; t + 8 <= n_tok; t += 8)
    TokensWide<R, 8, kMins, kDot>(rows.data(), nb, factor, act + t, out + t * out_stride, out_stride);
  for (; t + 4 <= n_tok; t += 4)
    TokensWide<R, 4, kMins, kDot>(rows.data(), nb, factor, act + t, out + t * out_stride, out_stride);
  for (; t < n_tok; ++t)
    TokensWide<R, 1, kMins, kDot>(rows.data(), nb, factor, act + t, out + t * out_stride, out_stride);
}

// Copies of n_tok tokens' Q8_K blocks with every activation plus 128 (as unsigned bytes), for the signed VNNI
// products (TokenLanes): made once per pass over the rows, so no sign trick per token, row and block.
inline void BiasActivations(int64_t nb, const uint8_t* const* act, int n_tok, const uint8_t** biased) {
  thread_local std::vector<BlockQ8_K> buf;
  if (static_cast<int64_t>(buf.size()) < n_tok * nb) buf.resize(static_cast<size_t>(n_tok * nb));
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  for (int t = 0; t < n_tok; ++t) {
    BlockQ8_K* dst = buf.data() + t * nb;
    std::memcpy(dst, act[t], static_cast<size_t>(nb) * sizeof(BlockQ8_K));
    for (int64_t i = 0; i < nb; ++i)
      for (int c = 0; c < 8; ++c) {
        auto* p = reinterpret_cast<__m256i*>(dst[i].qs + 32 * c);
        _mm256_storeu_si256(p, _mm256_xor_si256(_mm256_loadu_si256(p), flip));
      }
    biased[t] = reinterpret_cast<const uint8_t*>(dst);
  }
}

// n_rows rows (out[t * out_stride + r]) against 4 or more tokens: VNNI rows in groups of 4, so that each block's
// activations serve 4 rows while in L1 (gemm_bench 1024 3584 512, 1 thread: Q4_K 72 -> 103, Q6_K 66 -> 92,
// IQ3_XXS 64 -> 89 GMAC/s; 3584 1024 512, whose 32 tokens fit L1 anyway: unchanged within noise).
template <DecodeFn kDecode, bool kMins, WideDot kDot>
void RowsWide(int64_t nb, size_t block_bytes, float factor, const uint8_t* w, size_t w_stride, int64_t n_rows,
              const uint8_t* const* act, int n_tok, float* out, int64_t out_stride) {
  constexpr int kR = kDot == WideDot::kSignTrick ? 1 : 4;
  const uint8_t* biased_act[kMaxWideTok];
  if constexpr (kDot == WideDot::kVnni) {
    BiasActivations(nb, act, n_tok, biased_act);
    act = biased_act;
  }
  int64_t r = 0;
  for (; r + kR <= n_rows; r += kR)
    RowsKWide<kDecode, kMins, kDot, kR>(nb, block_bytes, factor, w + r * w_stride, w_stride, act, n_tok, out + r,
                                        out_stride);
  for (; r < n_rows; ++r)
    RowsKWide<kDecode, kMins, kDot, 1>(nb, block_bytes, factor, w + r * w_stride, w_stride, act, n_tok, out + r,
                                       out_stride);
}
#pragma GCC diagnostic pop

template <DecodeFn kDecode, bool kMins>
void RowK(int64_t nb, size_t block_bytes, float factor, const uint8_t* w, const uint8_t* const* act, int n_tok,
          float* out, int64_t out_stride) {
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
void Rows32(int64_t nb, const uint8_t* w, size_t w_stride, int64_t n_rows, const uint8_t* const* act, int n_tok,
            float* out, int64_t out_stride, bool /*wide*/) {
  for (int64_t r = 0; r < n_rows; ++r, w += w_stride, ++out) {
    switch (n_tok) {
      case 1: Row32N<kMx, 1>(nb, w, act, n_tok, out, out_stride); break;
      case 2: Row32N<kMx, 2>(nb, w, act, n_tok, out, out_stride); break;
      case 3: Row32N<kMx, 3>(nb, w, act, n_tok, out, out_stride); break;
      default: Row32N<kMx, 0>(nb, w, act, n_tok, out, out_stride); break;
    }
  }
}

// ---- Dispatch ---------------------------------------------------------------------------------------------

// n_rows rows from w (w_stride bytes apart) against n_tok tokens: out[t * out_stride + r].
using RowsFn = void (*)(int64_t nb, const uint8_t* w, size_t w_stride, int64_t n_rows, const uint8_t* const* act,
                        int n_tok, float* out, int64_t out_stride, bool wide);

template <TT kType, DecodeFn kDecode>
void RowsOf(int64_t nb, const uint8_t* w, size_t w_stride, int64_t n_rows, const uint8_t* const* act, int n_tok,
            float* out, int64_t out_stride, bool wide) {
  const float factor = DotFactorK(kType);
  const auto block_bytes = static_cast<size_t>(GetTypeInfo(kType)->block_bytes);
  constexpr bool kMins = kType == TT::kQ2_K;
  if (wide && n_tok >= 4) {
    constexpr WideDot kDot = kType == TT::kIQ4_XS ? WideDot::kSignTrick
                             : kMins              ? WideDot::kVnniUnsigned
                                                  : WideDot::kVnni;
    return RowsWide<kDecode, kMins, kDot>(nb, block_bytes, factor, w, w_stride, n_rows, act, n_tok, out, out_stride);
  }
  // the 512-bit IQ*_XXS decode path's pdep and vpermt2b / vpmultishiftqb
  static const bool bmi2_vbmi = __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("avx512vbmi");
  if (iq_few::RowsFew(kType, nb, w, w_stride, n_rows, act, n_tok, out, out_stride, wide && bmi2_vbmi)) return;
  for (int64_t r = 0; r < n_rows; ++r, w += w_stride, ++out) {
    if (RowFew(kType, nb, factor, w, act, n_tok, out, out_stride)) continue;  // decode path of some types
    RowK<kDecode, kMins>(nb, block_bytes, factor, w, act, n_tok, out, out_stride);
  }
}

RowsFn RowsKernel(TT t) {
  switch (t) {
    case TT::kQ2_K: return RowsOf<TT::kQ2_K, DecodeQ2_K>;
    case TT::kQ3_K: return RowsOf<TT::kQ3_K, DecodeQ3_K>;
    case TT::kIQ4_XS: return RowsOf<TT::kIQ4_XS, DecodeIQ4_XS>;
    case TT::kIQ2_XXS: return RowsOf<TT::kIQ2_XXS, DecodeIQ2_XXS>;
    case TT::kIQ3_XXS: return RowsOf<TT::kIQ3_XXS, DecodeIQ3_XXS>;
    case TT::kIQ2_XS: return RowsOf<TT::kIQ2_XS, DecodeIQ2_XS>;
    case TT::kIQ2_S: return RowsOf<TT::kIQ2_S, DecodeIQ2_S>;
    case TT::kIQ3_S: return RowsOf<TT::kIQ3_S, DecodeIQ3_S>;
    case TT::kIQ1_S: return RowsOf<TT::kIQ1_S, DecodeIQ1_S>;
    case TT::kIQ1_M: return RowsOf<TT::kIQ1_M, DecodeIQ1_M>;
    case TT::kTQ1_0: return RowsOf<TT::kTQ1_0, DecodeScalar<TT::kTQ1_0>>;
    case TT::kTQ2_0: return RowsOf<TT::kTQ2_0, DecodeTQ2_0>;
    case TT::kIQ4_NL: return Rows32<false>;
    case TT::kMXFP4: return Rows32<true>;
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
  const RowsFn rows_fn = RowsKernel(t);
  const int64_t nb = n / BlockSize(t);
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* ab = static_cast<const uint8_t*>(act);
  const int64_t chunk = wide && IsLowbitKType(t) ? kMaxWideTok : kMaxTok;  // Rows32 holds kMaxTok sums
  for (int64_t t0 = 0; t0 < n_tok; t0 += chunk) {
    const int tn = static_cast<int>(std::min<int64_t>(chunk, n_tok - t0));
    const uint8_t* at[kMaxWideTok];
    bool minus128[kMaxWideTok];
    bool any = false;
    for (int k = 0; k < tn; ++k) {
      at[k] = ab + (t0 + k) * act_stride;
      minus128[k] = HasMinus128Act(t, at[k], nb);
      any |= minus128[k];
    }
    rows_fn(nb, wb, w_stride, n_rows, at, tn, out + t0 * out_stride, out_stride, wide);
    if (!any) continue;
    for (int k = 0; k < tn; ++k)
      if (minus128[k])
        for (int64_t r = 0; r < n_rows; ++r)
          out[(t0 + k) * out_stride + r] = DotLowbitRef(t, wb + r * w_stride, at[k], nb);
  }
}

void GemmRowsKWide(TT t, int64_t n, const void* w, size_t w_stride, int64_t n_rows, const void* act,
                   size_t act_stride, int64_t n_tok, float* out, int64_t out_stride) {
  const size_t block_bytes = static_cast<size_t>(GetTypeInfo(t)->block_bytes);
  const int64_t nb = n / 256;
  for (int64_t t0 = 0; t0 < n_tok; t0 += kMaxWideTok) {
    const int tn = static_cast<int>(std::min<int64_t>(kMaxWideTok, n_tok - t0));
    const uint8_t* at[kMaxWideTok];
    for (int k = 0; k < tn; ++k) at[k] = static_cast<const uint8_t*>(act) + (t0 + k) * act_stride;
    const auto* wb = static_cast<const uint8_t*>(w);
    float* o = out + t0 * out_stride;
    switch (t) {
      case TT::kQ4_K:
        RowsWide<DecodeQx_K<false>, true, WideDot::kVnniUnsigned>(nb, block_bytes, 1.0f, wb, w_stride, n_rows, at, tn,
                                                                  o, out_stride);
        break;
      case TT::kQ5_K:
        RowsWide<DecodeQx_K<true>, true, WideDot::kVnniUnsigned>(nb, block_bytes, 1.0f, wb, w_stride, n_rows, at, tn,
                                                                 o, out_stride);
        break;
      case TT::kQ6_K:
        RowsWide<DecodeQ6_K, false, WideDot::kVnniQ6>(nb, block_bytes, 1.0f, wb, w_stride, n_rows, at, tn, o,
                                                      out_stride);
        break;
      default: REWIND_CHECK_MSG(false, "GemmRowsKWide: %s", TypeName(t));
    }
  }
}

void VecDotRows(TT t, int64_t n, const void* w, size_t w_stride, int64_t n_rows, const void* act, float* out,
                bool wide) {
  GemmRows(t, n, w, w_stride, n_rows, act, 0, 1, out, 1, wide);
}

}  // namespace rw::kernels::lowbit_avx2
