// AVX2 + FMA + F16C dot products. This file is compiled with -mavx2 -mfma -mf16c -ffp-contract=off and is
// only called after the CPU check in vec_dot.cc.
//
// Fixed reduction order (I1): every dot product of a given n runs the same instruction sequence: integer sums
// per block (exact), one 8-lane float accumulator updated once per block with an FMA in block order, one
// fixed horizontal sum at the end (plus, for the _1 formats, a scalar min term accumulated in block order).
// Several rows are processed together only to share the activation loads; each row keeps its own
// accumulators, so its bits do not depend on how many rows the call has or where the row sits.
#include "kernels/vec_dot_avx2.h"

#include <immintrin.h>

#include <cstddef>
#include <cstring>
#include <type_traits>

#include "base/cpu_features.h"
#include "gguf/quants.h"
#include "gguf/quants_lowbit.h"
#include "kernels/avx2_blocks.h"
#include "kernels/lowbit_avx2.h"

namespace rw::kernels::avx2 {
namespace {

using gguf::BlockQ4_0;
using gguf::BlockQ4_1;
using gguf::BlockQ4_K;
using gguf::BlockQ5_0;
using gguf::BlockQ5_1;
using gguf::BlockQ5_K;
using gguf::BlockQ6_K;
using gguf::BlockQ8_0;
using gguf::BlockQ8_1;
using gguf::BlockQ8_K;
using gguf::TensorType;
using namespace avx2_blocks;  // Hsum, loads, K-quant scale and Q6_K unpacking

bool g_use_avx512 = CpuHasAvx512();  // AVX-512 VNNI variants (same bits); tests switch them off to compare

// ---- Helpers ----------------------------------------------------------------------------------------------

template <size_t kBytes>
inline void Prefetch(const void* block, ptrdiff_t ahead) {
  const char* p = static_cast<const char*>(block) + ahead;
  for (size_t off = 0; off < kBytes; off += 64) _mm_prefetch(p + off, _MM_HINT_T0);
}

// Same for two signed int8 vectors (s is never -128: activations are in [-127, 127]).
inline __m256i DotSigned(__m256i x, __m256i s) {
  return DotUnsigned(_mm256_sign_epi8(x, x), _mm256_sign_epi8(s, x));
}

// ---- 32-element formats -----------------------------------------------------------------------------------
// Each kernel: template over R rows; w[r] points at row r's blocks, a at the activation blocks.

template <int R>
void RowsQ8_0(int64_t nb, const uint8_t* const* w, ptrdiff_t ahead, const void* act, float* out) {
  const auto* a = static_cast<const BlockQ8_0*>(act);
  __m256 acc[R];
  #pragma GCC unroll 4
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const __m256i qa = Load256(a[i].qs);
    const float da = H2F(a[i].d);
    #pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const auto* x = reinterpret_cast<const BlockQ8_0*>(w[r]) + i;
      Prefetch<sizeof(BlockQ8_0)>(x, ahead);
      const __m256 d = _mm256_set1_ps(H2F(x->d) * da);
      acc[r] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(DotSigned(Load256(x->qs), qa)), acc[r]);
    }
  }
  #pragma GCC unroll 4
  for (int r = 0; r < R; ++r) out[r] = Hsum(acc[r]);
}

// RowsQ8_0 with AVX-512 VNNI, two rows per 512-bit register (lanes 0-7: row r, 8-15: row r+1). vpdpbusd
// multiplies unsigned by signed bytes and adds each group of 4 products into int32 lane j (bytes 4j..4j+3), the
// lane layout of maddubs + madd in RowsQ8_0. The weights are made unsigned (w + 128); the excess,
// 128 * (sum of the lane's 4 activations), is the same for every row: computed once per block, it starts each
// lane negated, so each lane holds exactly sum a*w, RowsQ8_0's number (which is exact there only for
// activations != -128: VecDotRows sends blocks containing -128 to RowsQ8_0). The float part is RowsQ8_0's lane
// by lane: the scalar product dw * da, one FMA of the converted lane sums per block, the same Hsum per row.
#pragma GCC diagnostic push  // GCC 12's AVX-512 broadcasts start from _mm512_undefined_*()
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
template <int R>
__attribute__((target("avx2,fma,f16c,avx512f,avx512dq,avx512bw,avx512vl,avx512vnni"))) void RowsQ8_0Zmm(
    int64_t nb, const uint8_t* const* w, ptrdiff_t ahead, const void* act, float* out) {
  static_assert(R % 2 == 0, "two rows per register");
  constexpr int P = R / 2;
  const auto* a = static_cast<const BlockQ8_0*>(act);
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
  __m512 acc[P];
#pragma GCC unroll 4
  for (int p = 0; p < P; ++p) acc[p] = _mm512_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const __m512i qa = _mm512_broadcast_i64x4(Load256(a[i].qs));
    const __m512i excess = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), bias, qa));
    const float da = H2F(a[i].d);
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) {
      const auto* x0 = reinterpret_cast<const BlockQ8_0*>(w[2 * p]) + i;
      const auto* x1 = reinterpret_cast<const BlockQ8_0*>(w[2 * p + 1]) + i;
      Prefetch<sizeof(BlockQ8_0)>(x0, ahead);
      Prefetch<sizeof(BlockQ8_0)>(x1, ahead);
      const __m512i xu = _mm512_xor_si512(PairI(Load256(x0->qs), Load256(x1->qs)), bias);
      const __m512 d = PairF(H2F(x0->d) * da, H2F(x1->d) * da);
      acc[p] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(excess, xu, qa)), acc[p]);
    }
  }
#pragma GCC unroll 4
  for (int p = 0; p < P; ++p) {
    out[2 * p] = Hsum(_mm512_castps512_ps256(acc[p]));
    out[2 * p + 1] = Hsum(_mm512_extractf32x8_ps(acc[p], 1));
  }
}
#pragma GCC diagnostic pop

template <int R>
void RowsQ4_0(int64_t nb, const uint8_t* const* w, ptrdiff_t ahead, const void* act, float* out) {
  const auto* a = static_cast<const BlockQ8_0*>(act);
  const __m256i off = _mm256_set1_epi8(8);
  __m256 acc[R];
  #pragma GCC unroll 4
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const __m256i qa = Load256(a[i].qs);
    const float da = H2F(a[i].d);
    #pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const auto* x = reinterpret_cast<const BlockQ4_0*>(w[r]) + i;
      Prefetch<sizeof(BlockQ4_0)>(x, ahead);
      const __m256i q = _mm256_sub_epi8(UnpackNibbles16(x->qs), off);
      const __m256 d = _mm256_set1_ps(H2F(x->d) * da);
      acc[r] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(DotSigned(q, qa)), acc[r]);
    }
  }
  #pragma GCC unroll 4
  for (int r = 0; r < R; ++r) out[r] = Hsum(acc[r]);
}

template <int R>
void RowsQ5_0(int64_t nb, const uint8_t* const* w, ptrdiff_t ahead, const void* act, float* out) {
  const auto* a = static_cast<const BlockQ8_0*>(act);
  const __m256i hi_mask = _mm256_set1_epi8(static_cast<char>(0xF0));
  __m256 acc[R];
  #pragma GCC unroll 4
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const __m256i qa = Load256(a[i].qs);
    const float da = H2F(a[i].d);
    #pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const auto* x = reinterpret_cast<const BlockQ5_0*>(w[r]) + i;
      Prefetch<sizeof(BlockQ5_0)>(x, ahead);
      // nibble | (bit ? 0 : 0xF0) == nibble + 16*bit - 16 as int8.
      const __m256i q = _mm256_or_si256(UnpackNibbles16(x->qs), _mm256_andnot_si256(BytesFromBits32(x->qh), hi_mask));
      const __m256 d = _mm256_set1_ps(H2F(x->d) * da);
      acc[r] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(DotSigned(q, qa)), acc[r]);
    }
  }
  #pragma GCC unroll 4
  for (int r = 0; r < R; ++r) out[r] = Hsum(acc[r]);
}

// Q4_1 / Q5_1 against Q8_1: d_w*d_a*sum(q_w*q_a) in the vector accumulator, m_w*s_a in a scalar one.
template <int R, bool kFive>
void RowsQx_1(int64_t nb, const uint8_t* const* w, ptrdiff_t ahead, const void* act, float* out) {
  const auto* a = static_cast<const BlockQ8_1*>(act);
  const __m256i bit4 = _mm256_set1_epi8(0x10);
  __m256 acc[R];
  float summ[R];
  #pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    acc[r] = _mm256_setzero_ps();
    summ[r] = 0.0f;
  }
  for (int64_t i = 0; i < nb; ++i) {
    const __m256i qa = Load256(a[i].qs);
    const float da = H2F(a[i].d), sa = H2F(a[i].s);
    #pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      __m256i q;
      uint16_t dw, mw;
      if constexpr (kFive) {
        const auto* x = reinterpret_cast<const BlockQ5_1*>(w[r]) + i;
        Prefetch<sizeof(BlockQ5_1)>(x, ahead);
        q = _mm256_or_si256(UnpackNibbles16(x->qs), _mm256_and_si256(BytesFromBits32(x->qh), bit4));
        dw = x->d;
        mw = x->m;
      } else {
        const auto* x = reinterpret_cast<const BlockQ4_1*>(w[r]) + i;
        Prefetch<sizeof(BlockQ4_1)>(x, ahead);
        q = UnpackNibbles16(x->qs);
        dw = x->d;
        mw = x->m;
      }
      const __m256 d = _mm256_set1_ps(H2F(dw) * da);
      acc[r] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(DotUnsigned(q, qa)), acc[r]);
      summ[r] += H2F(mw) * sa;
    }
  }
  #pragma GCC unroll 4
  for (int r = 0; r < R; ++r) out[r] = Hsum(acc[r]) + summ[r];
}

// ---- K formats --------------------------------------------------------------------------------------------
// Per super-block: exact int32 sums of scale * q_w * q_a in 8 lanes, then acc += d * sums (one FMA) and, for
// Q4_K/Q5_K, acc -= dmin * (mins . bsums) in 8 lanes (one FNMA).

template <int R, bool kFive>
void RowsQx_K(int64_t nb, const uint8_t* const* w, ptrdiff_t ahead, const void* act, float* out) {
  const auto* a = static_cast<const BlockQ8_K*>(act);
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i one = _mm256_set1_epi8(1);
  __m256 acc[R];
  #pragma GCC unroll 4
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const BlockQ8_K* y = a + i;
    #pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const uint8_t* qs;
      const uint8_t* packed;
      uint16_t dw, dminw;
      __m256i hbits = _mm256_setzero_si256();
      if constexpr (kFive) {
        const auto* x = reinterpret_cast<const BlockQ5_K*>(w[r]) + i;
        Prefetch<sizeof(BlockQ5_K)>(x, ahead);
        qs = x->qs;
        packed = x->scales;
        dw = x->d;
        dminw = x->dmin;
        hbits = Load256(x->qh);
      } else {
        const auto* x = reinterpret_cast<const BlockQ4_K*>(w[r]) + i;
        Prefetch<sizeof(BlockQ4_K)>(x, ahead);
        qs = x->qs;
        packed = x->scales;
        dw = x->d;
        dminw = x->dmin;
      }
      uint32_t utmp[4];
      UnpackScalesMins(packed, utmp);
      // Scales in bytes 0..7, mins in 8..15, built from registers (a vector load of utmp would stall on store
      // forwarding). 8 scales as int16 in both 128-bit lanes; sub-block j's is broadcast with one byte shuffle.
      const __m128i scmn = _mm_set_epi32(static_cast<int>(utmp[3]), static_cast<int>(utmp[2]),
                                         static_cast<int>(utmp[1]), static_cast<int>(utmp[0]));
      const __m256i sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(scmn));
      __m256i sumi = _mm256_setzero_si256();
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) {
        const __m256i q = Load256(qs + 32 * c);
        __m256i lo = _mm256_and_si256(q, m4);
        __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
        if constexpr (kFive) {
          lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hbits, 2 * c), one), 4));
          hi = _mm256_or_si256(hi,
                               _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hbits, 2 * c + 1), one), 4));
        }
        const __m256i plo = _mm256_maddubs_epi16(lo, Load256(y->qs + 64 * c));
        const __m256i phi = _mm256_maddubs_epi16(hi, Load256(y->qs + 64 * c + 32));
        sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(plo, _mm256_shuffle_epi8(sc16, ScaleShuffle(2 * c))));
        sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(phi, _mm256_shuffle_epi8(sc16, ScaleShuffle(2 * c + 1))));
      }
      const __m256 d = _mm256_set1_ps(H2F(dw) * y->d);
      const __m256 dmin = _mm256_set1_ps(H2F(dminw) * y->d);
      acc[r] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi), acc[r]);
      acc[r] = _mm256_fnmadd_ps(dmin, _mm256_cvtepi32_ps(MinsDotBsums(_mm_cvtepu8_epi16(_mm_srli_si128(scmn, 8)), y)), acc[r]);
    }
  }
  #pragma GCC unroll 4
  for (int r = 0; r < R; ++r) out[r] = Hsum(acc[r]);
}

template <int R>
void RowsQ6_K(int64_t nb, const uint8_t* const* w, ptrdiff_t ahead, const void* act, float* out) {
  const auto* a = static_cast<const BlockQ8_K*>(act);
  __m256 acc[R];
  #pragma GCC unroll 4
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const BlockQ8_K* y = a + i;
    const __m256i bsums = Load256(reinterpret_cast<const uint8_t*>(y) + offsetof(BlockQ8_K, bsums));
    #pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const auto* x = reinterpret_cast<const BlockQ6_K*>(w[r]) + i;
      Prefetch<sizeof(BlockQ6_K)>(x, ahead);
      const __m256i sc16 = _mm256_cvtepi8_epi16(Load128(x->scales));  // [16] int16
      // sum over groups of Sc_g * (q - 32) * a == sum Sc_g * q * a - 32 * sum Sc_g * bsums_g.
      __m256i sumi = _mm256_slli_epi32(_mm256_madd_epi16(bsums, sc16), 5);
      sumi = _mm256_sub_epi32(_mm256_setzero_si256(), sumi);
#pragma GCC unroll 2
      for (int n = 0; n < 2; ++n) {
        __m256i q[4];
        UnpackQ6Half(x, n, q);
        // Both 128-bit lanes hold Sc[8n .. 8n+7]; PairShuffle(k) puts Sc[8n+2k] in the low lane and
        // Sc[8n+2k+1] in the high lane (the scales of elements 32k..32k+15 and 32k+16..32k+31).
        const __m256i sc_half = _mm256_permute4x64_epi64(sc16, n ? 0xEE : 0x44);
#pragma GCC unroll 4
        for (int k = 0; k < 4; ++k) {
          const __m256i s = _mm256_shuffle_epi8(sc_half, PairShuffle(k));
          const __m256i p = _mm256_maddubs_epi16(q[k], Load256(y->qs + 128 * n + 32 * k));
          sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, s));
        }
      }
      const __m256 d = _mm256_set1_ps(H2F(x->d) * y->d);
      acc[r] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi), acc[r]);
    }
  }
  #pragma GCC unroll 4
  for (int r = 0; r < R; ++r) out[r] = Hsum(acc[r]);
}

// ---- K formats on AVX-512 VNNI, one row -------------------------------------------------------------------
// Decode (one token) reads each weight row once, and at 1-2 threads per memory channel the 256-bit kernels above
// are bound by their instruction count, not by memory. These put two 32-value sub-blocks in one 512-bit register
// (the low half: RowsQx_K's `lo` / RowsQ6_K's half 0, the high half: `hi` / half 1), with activations and scales
// laid out to match. maddubs makes the same int16 pairs, vpdpwssd the same int32 products of pairs and scales
// added into the lane, and at the end of a super-block the two halves are added lane by lane: integer sums of
// the same terms as the 256-bit kernel's lane j, so the same exact int32. The float steps are the 256-bit ones.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#define REWIND_ZMM_TARGET __attribute__((target("avx2,fma,f16c,avx512f,avx512dq,avx512bw,avx512vl,avx512vnni")))

// Shuffle control for a 512-bit copy of 8 int16 scales in every 128-bit lane: scale j in the low 256 bits,
// scale k in the high 256 bits, broadcast to every int16.
REWIND_ZMM_TARGET inline __m512i ScaleShuffleHalves(int j, int k) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(ScaleShuffle(j)), ScaleShuffle(k), 1);
}

REWIND_ZMM_TARGET inline __m256i AddHalves(__m512i v) {
  return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
}

template <bool kFive>
REWIND_ZMM_TARGET void RowQx_KZmm(int64_t nb, const uint8_t* const* w, ptrdiff_t ahead, const void* act,
                                  float* out) {
  using Block = std::conditional_t<kFive, BlockQ5_K, BlockQ4_K>;
  const auto* a = static_cast<const BlockQ8_K*>(act);
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  const __m512i one = _mm512_set1_epi8(1);
  constexpr __mmask32 kHigh = 0xFFFF0000u;  // the int16 lanes of the high 256 bits
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const BlockQ8_K* y = a + i;
    const auto* x = reinterpret_cast<const Block*>(w[0]) + i;
    Prefetch<sizeof(Block)>(x, ahead);
    uint32_t utmp[4];
    UnpackScalesMins(x->scales, utmp);
    const __m128i scmn = _mm_set_epi32(static_cast<int>(utmp[3]), static_cast<int>(utmp[2]),
                                       static_cast<int>(utmp[1]), static_cast<int>(utmp[0]));
    const __m512i sc16 = _mm512_broadcast_i32x4(_mm_cvtepu8_epi16(scmn));
    __m512i hbits = _mm512_setzero_si512();
    if constexpr (kFive) hbits = _mm512_broadcast_i64x4(Load256(x->qh));
    __m512i sumi = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      // [q | q] >> [0 | 4]: low nibbles (sub-block 2c) below, high nibbles (2c + 1) above.
      const __m512i q2 = _mm512_broadcast_i64x4(Load256(x->qs + 32 * c));
      __m512i q = _mm512_and_si512(_mm512_mask_srli_epi16(q2, kHigh, q2, 4), m4);
      if constexpr (kFive) {
        const __m512i h = _mm512_srli_epi16(hbits, 2 * c);
        q = _mm512_or_si512(q, _mm512_slli_epi16(_mm512_and_si512(_mm512_mask_srli_epi16(h, kHigh, h, 1), one), 4));
      }
      const __m512i p = _mm512_maddubs_epi16(q, _mm512_loadu_si512(y->qs + 64 * c));
      sumi = _mm512_dpwssd_epi32(sumi, p, _mm512_shuffle_epi8(sc16, ScaleShuffleHalves(2 * c, 2 * c + 1)));
    }
    const __m256 d = _mm256_set1_ps(H2F(x->d) * y->d);
    const __m256 dmin = _mm256_set1_ps(H2F(x->dmin) * y->d);
    acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(AddHalves(sumi)), acc);
    acc = _mm256_fnmadd_ps(dmin, _mm256_cvtepi32_ps(MinsDotBsums(_mm_cvtepu8_epi16(_mm_srli_si128(scmn, 8)), y)), acc);
  }
  out[0] = Hsum(acc);
}

// Q6_K: half 0 in the low 256 bits, half 1 in the high 256 bits (UnpackQ6Half's q[k] for both at once).
REWIND_ZMM_TARGET void RowQ6_KZmm(int64_t nb, const uint8_t* const* w, ptrdiff_t ahead, const void* act,
                                  float* out) {
  const auto* a = static_cast<const BlockQ8_K*>(act);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const BlockQ8_K* y = a + i;
    const auto* x = reinterpret_cast<const BlockQ6_K*>(w[0]) + i;
    Prefetch<sizeof(BlockQ6_K)>(x, ahead);
    const __m256i bsums = Load256(reinterpret_cast<const uint8_t*>(y) + offsetof(BlockQ8_K, bsums));
    const __m256i sc16 = _mm256_cvtepi8_epi16(Load128(x->scales));  // [16] int16
    const __m256i corr = _mm256_slli_epi32(_mm256_madd_epi16(bsums, sc16), 5);
    // Scales 0..7 in both 128-bit lanes of the low half, 8..15 in both of the high half.
    const __m512i sc = _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 1, 0, 1, 2, 3, 2, 3), _mm512_castsi256_si512(sc16));
    const __m512i l0 = PairI(Load256(x->ql), Load256(x->ql + 64));
    const __m512i l1 = PairI(Load256(x->ql + 32), Load256(x->ql + 96));
    const __m512i h = _mm512_loadu_si512(x->qh);
    __m512i q[4];
    UnpackQ6Zmm(l0, l1, h, q);
    __m512i sumi = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const __m512i ya = PairI(Load256(y->qs + 32 * k), Load256(y->qs + 128 + 32 * k));
      const __m512i s = _mm512_shuffle_epi8(sc, _mm512_broadcast_i64x4(PairShuffle(k)));
      sumi = _mm512_dpwssd_epi32(sumi, _mm512_maddubs_epi16(q[k], ya), s);
    }
    // RowsQ6_K's lane: -32 * (scales . bsums) first, then the products of both halves.
    const __m256i sum = _mm256_add_epi32(_mm256_sub_epi32(_mm256_setzero_si256(), corr), AddHalves(sumi));
    const __m256 d = _mm256_set1_ps(H2F(x->d) * y->d);
    acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sum), acc);
  }
  out[0] = Hsum(acc);
}
#undef REWIND_ZMM_TARGET
#pragma GCC diagnostic pop

// ---- Float formats (n any) ---------------------------------------------------------------------------------
// The order of llama.cpp's tinyBLAS (llamafile sgemm), which is what its CPU backend uses for F16/BF16 weights
// whenever a batch has 2 or more tokens: one 8-lane accumulator, one FMA per 8 elements in order, then Hsum.
// A tail of n % 8 elements (never in real models) is added element by element after the Hsum.

inline __m256 LoadF32(const void* p, int64_t i) { return _mm256_loadu_ps(static_cast<const float*>(p) + i); }
inline __m256 LoadF16(const void* p, int64_t i) { return _mm256_cvtph_ps(Load128(static_cast<const uint16_t*>(p) + i)); }
inline __m256 LoadBF16(const void* p, int64_t i) {
  const __m256i v = _mm256_cvtepu16_epi32(Load128(static_cast<const uint16_t*>(p) + i));
  return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}
inline float ScalarF32(const void* p, int64_t i) { return static_cast<const float*>(p)[i]; }
inline float ScalarF16(const void* p, int64_t i) { return gguf::Fp16ToFp32(static_cast<const uint16_t*>(p)[i]); }
inline float ScalarBF16(const void* p, int64_t i) { return gguf::Bf16ToFp32(static_cast<const uint16_t*>(p)[i]); }

// R rows share each activation load; every row has its own single accumulator (one dependency chain per row,
// so single-row calls are FMA-latency bound; groups of 8 rows keep 8 FMAs in flight).
template <int R, __m256 (*Load)(const void*, int64_t), float (*Scalar)(const void*, int64_t), int kElemBytes>
void RowsFloat(int64_t n, const uint8_t* const* w, ptrdiff_t ahead, const void* act, float* out) {
  constexpr int64_t kLineElems = 64 / kElemBytes;
  __m256 acc[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 a = Load(act, i);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      if ((i & (kLineElems - 1)) == 0) _mm_prefetch(reinterpret_cast<const char*>(w[r]) + i * kElemBytes + ahead, _MM_HINT_T0);
      acc[r] = _mm256_fmadd_ps(Load(w[r], i), a, acc[r]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    float sum = Hsum(acc[r]);
    for (int64_t k = i; k < n; ++k) sum += Scalar(w[r], k) * Scalar(act, k);
    out[r] = sum;
  }
}

// ---- Row driver -------------------------------------------------------------------------------------------

// nb: blocks for the quantised formats, elements for F32/F16/BF16.
using RowsFn = void (*)(int64_t nb, const uint8_t* const* w, ptrdiff_t ahead, const void* act, float* out);

// Runs kernel K<G> over groups of G rows (4; 8 for the float formats, whose one accumulator per row makes a group of
// 4 FMA-latency bound; 1 for Q4_K and Q6_K, which stream from memory faster one row at a time) and K<1> over the
// rest (each row's bits are the same either way).
template <RowsFn kGroup, RowsFn kOne, int G = 4>
void DriveRows(int64_t nb, const uint8_t* base, size_t stride, int64_t n_rows, const void* act, float* out) {
  int64_t r = 0;
  for (; r + G <= n_rows; r += G) {
    const uint8_t* rows[G];
    for (int k = 0; k < G; ++k) rows[k] = base + (r + k) * stride;
    kGroup(nb, rows, static_cast<ptrdiff_t>(G * stride), act, out + r);
  }
  for (; r < n_rows; ++r) {
    const uint8_t* row = base + r * stride;
    kOne(nb, &row, static_cast<ptrdiff_t>(stride), act, out + r);
  }
}

}  // namespace

void AllowAvx512(bool allow) { g_use_avx512 = allow && CpuHasAvx512(); }

bool Supports(TensorType t) { return gguf::IsSupportedWeightType(t); }

void VecDotRows(TensorType t, int64_t n, const void* w, size_t stride, int64_t n_rows, const void* act,
                float* out) {
  const auto* base = static_cast<const uint8_t*>(w);
  const int64_t nb = n / gguf::BlockSize(t);  // == n for the float formats
  switch (t) {
    case TensorType::kQ8_0:
      if (g_use_avx512 && !HasMinus128(act, nb))
        return DriveRows<RowsQ8_0Zmm<4>, RowsQ8_0<1>>(nb, base, stride, n_rows, act, out);
      return DriveRows<RowsQ8_0<4>, RowsQ8_0<1>>(nb, base, stride, n_rows, act, out);
    case TensorType::kQ4_0: return DriveRows<RowsQ4_0<4>, RowsQ4_0<1>>(nb, base, stride, n_rows, act, out);
    case TensorType::kQ5_0: return DriveRows<RowsQ5_0<4>, RowsQ5_0<1>>(nb, base, stride, n_rows, act, out);
    case TensorType::kQ4_1:
      return DriveRows<RowsQx_1<4, false>, RowsQx_1<1, false>>(nb, base, stride, n_rows, act, out);
    case TensorType::kQ5_1:
      return DriveRows<RowsQx_1<4, true>, RowsQx_1<1, true>>(nb, base, stride, n_rows, act, out);
    case TensorType::kQ4_K:
      if (g_use_avx512) return DriveRows<RowQx_KZmm<false>, RowQx_KZmm<false>, 1>(nb, base, stride, n_rows, act, out);
      return DriveRows<RowsQx_K<1, false>, RowsQx_K<1, false>, 1>(nb, base, stride, n_rows, act, out);
    case TensorType::kQ5_K:
      if (g_use_avx512) return DriveRows<RowQx_KZmm<true>, RowQx_KZmm<true>, 1>(nb, base, stride, n_rows, act, out);
      return DriveRows<RowsQx_K<4, true>, RowsQx_K<1, true>>(nb, base, stride, n_rows, act, out);
    case TensorType::kQ6_K:
      if (g_use_avx512) return DriveRows<RowQ6_KZmm, RowQ6_KZmm, 1>(nb, base, stride, n_rows, act, out);
      return DriveRows<RowsQ6_K<1>, RowsQ6_K<1>, 1>(nb, base, stride, n_rows, act, out);
    case TensorType::kF32:
      return DriveRows<RowsFloat<8, LoadF32, ScalarF32, 4>, RowsFloat<1, LoadF32, ScalarF32, 4>, 8>(
          n, base, stride, n_rows, act, out);
    case TensorType::kF16:
      return DriveRows<RowsFloat<8, LoadF16, ScalarF16, 2>, RowsFloat<1, LoadF16, ScalarF16, 2>, 8>(
          n, base, stride, n_rows, act, out);
    case TensorType::kBF16:
      return DriveRows<RowsFloat<8, LoadBF16, ScalarBF16, 2>, RowsFloat<1, LoadBF16, ScalarBF16, 2>, 8>(
          n, base, stride, n_rows, act, out);
    default:
      if (gguf::IsLowbitType(t)) return lowbit_avx2::VecDotRows(t, n, w, stride, n_rows, act, out, g_use_avx512);
      break;
  }
}

}  // namespace rw::kernels::avx2
