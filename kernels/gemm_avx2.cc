// AVX2 + FMA + F16C tiled kernels behind kernels/gemm.h. Compiled with -mavx2 -mfma -mf16c -ffp-contract=off
// and only called after the CPU check in gemm.cc. Where the CPU also has AVX-512 (F, DQ, BW, VL, VNNI), the
// *Zmm variants are used instead: two tokens per 512-bit register, every element still gets the float
// operations of the 256-bit kernel lane by lane (see each variant); gemm_test checks both sets.
//
// A tile is R weight rows x T tokens with R*T independent accumulators. For each element (r, t) the float
// operations are exactly those of the R = T = 1 kernel, which are those of kernels/vec_dot_avx2.cc: integer
// block sums are exact whatever instructions produce them as long as each int32 lane sums the same products
// (same lane layout), and the float part is one FMA per block with the same operands, then the same Hsum.
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <vector>

#include "base/cpu_features.h"
#include "gguf/quants.h"
#include "gguf/quants_lowbit.h"
#include "kernels/alloc_tuning.h"
#include "kernels/f16_row.h"
#include "kernels/gemm.h"
#include "kernels/gemm_tiles_avx2.h"
#include "kernels/gemm_tiles_avx512.h"
#include "kernels/gemm_tiles_legacy_avx2.h"
#include "kernels/lowbit_avx2.h"

namespace rw::kernels::gemm_avx2 {
namespace {

using gguf::TensorType;

bool g_use_avx512 = CpuHasAvx512();

// True if some token's Q8_0 activations contain -128 (avx2_blocks::HasMinus128).
bool HasMinus128(const uint8_t* act, size_t stride, int64_t n_tok, int64_t nb) {
  for (int64_t t = 0; t < n_tok; ++t)
    if (avx2_blocks::HasMinus128(act + t * stride, nb)) return true;
  return false;
}

// ---- Driver -----------------------------------------------------------------------------------------------

constexpr int64_t kTokBlock = 48;
constexpr int64_t kPrefetchMaxTok = 8;  // tokens whose activations stay in L2 while the rows stream (multiple of each kT)

template <class K, int R, int T>
inline void RunTile(int64_t nb, const uint8_t* wbase, size_t w_stride, int64_t r, const uint8_t* abase,
                    size_t a_stride, int64_t t, float* out, int64_t out_stride) {
  const uint8_t* wr[R];
  const uint8_t* at[T];
  for (int i = 0; i < R; ++i) wr[i] = wbase + (r + i) * w_stride;
  for (int j = 0; j < T; ++j) at[j] = abase + (t + j) * a_stride;
  float res[R * T];
  K::template Run<R, T>(nb, wr, at, res);
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < T; ++j) out[(t + j) * out_stride + r + i] = res[i * T + j];
}

template <class K, int R>
inline void RowGroup(int64_t nb, const uint8_t* w, size_t w_stride, int64_t r, const uint8_t* act,
                     size_t a_stride, int64_t t0, int64_t t1, float* out, int64_t out_stride) {
  constexpr int T = K::kT;
  int64_t t = t0;
  for (; t + T <= t1; t += T) RunTile<K, R, T>(nb, w, w_stride, r, act, a_stride, t, out, out_stride);
  // The remainder in halving tiles, so that a few tokens (a speculative verify batch of 2-8) read each weight
  // row once or twice instead of once per token. An element's operations do not depend on the tile shape.
  if constexpr (T > 4) {
    if (t + 4 <= t1) {
      RunTile<K, R, 4>(nb, w, w_stride, r, act, a_stride, t, out, out_stride);
      t += 4;
    }
  }
  if constexpr (T > 2) {
    if (t + 2 <= t1) {
      RunTile<K, R, 2>(nb, w, w_stride, r, act, a_stride, t, out, out_stride);
      t += 2;
    }
  }
  for (; t < t1; ++t) RunTile<K, R, 1>(nb, w, w_stride, r, act, a_stride, t, out, out_stride);
}

template <class K>
void Drive(int64_t nb, const uint8_t* w, size_t w_stride, int64_t n_rows, const uint8_t* act, size_t a_stride,
           int64_t n_tok, float* out, int64_t out_stride) {
  constexpr int R = K::kR;
  // A few tokens (a speculative verify batch) make the tiles memory-bound, and a row of a small matrix is too
  // short for the hardware prefetcher to learn: fetch the next row group while this one computes.
  const bool prefetch = n_tok <= kPrefetchMaxTok;
  const uint8_t* const w_end = w + n_rows * w_stride;
  for (int64_t t0 = 0; t0 < n_tok; t0 += kTokBlock) {
    const int64_t t1 = std::min(n_tok, t0 + kTokBlock);
    int64_t r = 0;
    for (; r + R <= n_rows; r += R) {
      if (prefetch) {
        const uint8_t* p = w + (r + R) * w_stride;
        const uint8_t* e = std::min(w_end, p + R * w_stride);
        for (; p < e; p += 64) _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T0);
      }
      RowGroup<K, R>(nb, w, w_stride, r, act, a_stride, t0, t1, out, out_stride);
    }
    for (; r < n_rows; ++r) RowGroup<K, 1>(nb, w, w_stride, r, act, a_stride, t0, t1, out, out_stride);
  }
}

// Q8_0 with 2-7 tokens on AVX-512 VNNI: RowPairsQ8_0 on groups of 8 rows (4 from 5 tokens on, so that the
// accumulators stay in registers; 2 rows for the remainder, KQ8_0Vnni for a last odd row), the tokens' start
// values and scales prepared once. (8 tokens: KQ8_0Zmm's full tile is faster.)
template <int T>
void DriveRowPairsQ8_0(int64_t nb, const uint8_t* w, size_t w_stride, int64_t n_rows, const uint8_t* act,
                       size_t a_stride, float* out, int64_t out_stride) {
  thread_local ScratchBuffer<Lanes16> start_buf;
  thread_local ScratchBuffer<float> da_buf;
  Q8_0Tokens tok;
  for (int t = 0; t < T; ++t) tok.act[t] = act + t * a_stride;
  Lanes16* start = start_buf.Get(static_cast<size_t>(T * nb));
  float* da = da_buf.Get(static_cast<size_t>(T * nb));
  PrepareQ8_0Tokens<T>(nb, act, a_stride, start, da);
  tok.start = start;
  tok.da = da;
  constexpr int R = T <= 4 ? 8 : 4;
  float res[R * T];
  auto store = [&](int64_t r, int rows) {
    for (int i = 0; i < rows; ++i)
      for (int t = 0; t < T; ++t) out[t * out_stride + r + i] = res[i * T + t];
  };
  int64_t r = 0;
  for (; r + R <= n_rows; r += R) {
    const uint8_t* rows[R];
    for (int i = 0; i < R; ++i) rows[i] = w + (r + i) * w_stride;
    // The next group while this one computes; none past the matrix.
    const ptrdiff_t ahead = r + 2 * R <= n_rows ? static_cast<ptrdiff_t>(R * w_stride) : 0;
    RowPairsQ8_0<R / 2, T>(nb, rows, ahead, tok, res);
    store(r, R);
  }
  for (; r + 2 <= n_rows; r += 2) {
    const uint8_t* rows[2] = {w + r * w_stride, w + (r + 1) * w_stride};
    RowPairsQ8_0<1, T>(nb, rows, 0, tok, res);
    store(r, 2);
  }
  if (r < n_rows) {
    const uint8_t* row = w + r * w_stride;
    KQ8_0Vnni::Run<1, T>(nb, &row, tok.act, res);
    store(r, 1);
  }
}

// Q4_K / Q5_K with 2-8 tokens and Q6_K with 3-8 on AVX-512 VNNI: RowPairQx_K / RowPairQ6_K on pairs of rows,
// prefetching 4 rows ahead; a last odd row through the 256-bit tile (KQx_K / KQ6_K).
template <bool kFive>
struct PairQx_K {
  template <int T>
  static void Pair(int64_t nb, const uint8_t* a, const uint8_t* b, ptrdiff_t ahead, const uint8_t* const* act,
                   float* out) {
    RowPairQx_K<kFive, T>(nb, a, b, ahead, act, out);
  }
  using Single = KQx_K<kFive>;
};
struct PairQ6_K {
  template <int T>
  static void Pair(int64_t nb, const uint8_t* a, const uint8_t* b, ptrdiff_t ahead, const uint8_t* const* act,
                   float* out) {
    RowPairQ6_K<T>(nb, a, b, ahead, act, out);
  }
  using Single = KQ6_K;
};

template <class K, int T>
void DriveRowPairsK(int64_t nb, const uint8_t* w, size_t w_stride, int64_t n_rows, const uint8_t* act,
                    size_t a_stride, float* out, int64_t out_stride) {
  const uint8_t* at[T];
  for (int t = 0; t < T; ++t) at[t] = act + t * a_stride;
  float res[2 * T];
  int64_t r = 0;
  for (; r + 2 <= n_rows; r += 2) {
    const ptrdiff_t ahead = r + 6 <= n_rows ? static_cast<ptrdiff_t>(4 * w_stride) : 0;
    K::template Pair<T>(nb, w + r * w_stride, w + (r + 1) * w_stride, ahead, at, res);
    for (int i = 0; i < 2; ++i)
      for (int t = 0; t < T; ++t) out[t * out_stride + r + i] = res[i * T + t];
  }
  if (r < n_rows) {
    const uint8_t* row = w + r * w_stride;
    K::Single::template Run<1, T>(nb, &row, at, res);
    for (int t = 0; t < T; ++t) out[t * out_stride + r] = res[t];
  }
}

// F16 on AVX-512: each block of kTokBlock tokens' activations converted to F32 once (half -> float is exact),
// then KF16Zmm on them.
void DriveF16Wide(int64_t n, const uint8_t* w, size_t w_stride, int64_t n_rows, const uint8_t* act, size_t a_stride,
                  int64_t n_tok, float* out, int64_t out_stride) {
  thread_local std::vector<float> buf;
  const int64_t block = std::min(n_tok, kTokBlock);
  if (static_cast<int64_t>(buf.size()) < block * n) buf.resize(static_cast<size_t>(block * n));
  for (int64_t t0 = 0; t0 < n_tok; t0 += kTokBlock) {
    const int64_t tn = std::min(kTokBlock, n_tok - t0);
    for (int64_t t = 0; t < tn; ++t)
      HalfToFloatRow(reinterpret_cast<const uint16_t*>(act + (t0 + t) * a_stride), buf.data() + t * n, n);
    Drive<KF16Zmm>(n, w, w_stride, n_rows, reinterpret_cast<const uint8_t*>(buf.data()), n * sizeof(float), tn,
                   out + t0 * out_stride, out_stride);
  }
}

// f.operator()<n>() when kFirst <= n <= kLast (a template argument from a runtime token count); false otherwise.
template <int kFirst, int kLast, class F>
bool ForTokenCount(int64_t n, F&& f) {
  if constexpr (kFirst > kLast) {
    return false;
  } else {
    if (n == kFirst) {
      f.template operator()<kFirst>();
      return true;
    }
    return ForTokenCount<kFirst + 1, kLast>(n, f);
  }
}

}  // namespace

void AllowAvx512(bool allow) { g_use_avx512 = allow && CpuHasAvx512(); }

bool Supports(TensorType t) {
  switch (t) {
    case TensorType::kQ8_0:
    case TensorType::kQ4_0:
    case TensorType::kQ4_1:
    case TensorType::kQ5_0:
    case TensorType::kQ5_1:
    case TensorType::kQ4_K:
    case TensorType::kQ5_K:
    case TensorType::kQ6_K:
    case TensorType::kF32:
    case TensorType::kF16:
    case TensorType::kBF16: return true;
    default: return gguf::IsLowbitType(t);
  }
}

void GemmRows(TensorType t, int64_t n, const void* w, size_t w_stride, int64_t n_rows, const void* act,
              size_t act_stride, int64_t n_tok, float* out, int64_t out_stride) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* ab = static_cast<const uint8_t*>(act);
  const int64_t nb = n / gguf::BlockSize(t);  // == n for the float formats
  auto run = [&]<class K>(int64_t len) { Drive<K>(len, wb, w_stride, n_rows, ab, act_stride, n_tok, out, out_stride); };
  const bool wide = g_use_avx512;
  switch (t) {
    case TensorType::kQ8_0:
      if (wide && !HasMinus128(ab, act_stride, n_tok, nb)) {
        if (ForTokenCount<2, 7>(n_tok, [&]<int T>() {
              DriveRowPairsQ8_0<T>(nb, wb, w_stride, n_rows, ab, act_stride, out, out_stride);
            }))
          return;
        return run.operator()<KQ8_0Zmm>(nb);
      }
      return run.operator()<KQ8_0>(nb);
    case TensorType::kQ4_K:
      if (wide && ForTokenCount<2, 8>(n_tok, [&]<int T>() {
            DriveRowPairsK<PairQx_K<false>, T>(nb, wb, w_stride, n_rows, ab, act_stride, out, out_stride);
          }))
        return;
      if (wide) return lowbit_avx2::GemmRowsKWide(t, n, w, w_stride, n_rows, act, act_stride, n_tok, out, out_stride);
      return run.operator()<KQx_K<false>>(nb);
    case TensorType::kQ5_K:
      if (wide && ForTokenCount<2, 8>(n_tok, [&]<int T>() {
            DriveRowPairsK<PairQx_K<true>, T>(nb, wb, w_stride, n_rows, ab, act_stride, out, out_stride);
          }))
        return;
      if (wide) return lowbit_avx2::GemmRowsKWide(t, n, w, w_stride, n_rows, act, act_stride, n_tok, out, out_stride);
      return run.operator()<KQx_K<true>>(nb);
    case TensorType::kQ6_K:
      // (2 tokens: KQ6_KZmm's token pairs are as fast.)
      if (wide && ForTokenCount<3, 8>(n_tok, [&]<int T>() {
            DriveRowPairsK<PairQ6_K, T>(nb, wb, w_stride, n_rows, ab, act_stride, out, out_stride);
          }))
        return;
      if (wide && n_tok > 2)
        return lowbit_avx2::GemmRowsKWide(t, n, w, w_stride, n_rows, act, act_stride, n_tok, out, out_stride);
      return wide ? run.operator()<KQ6_KZmm>(nb) : run.operator()<KQ6_K>(nb);
    case TensorType::kQ4_0: return run.operator()<KLegacy<TensorType::kQ4_0>>(nb);
    case TensorType::kQ4_1: return run.operator()<KLegacy<TensorType::kQ4_1>>(nb);
    case TensorType::kQ5_0: return run.operator()<KLegacy<TensorType::kQ5_0>>(nb);
    case TensorType::kQ5_1: return run.operator()<KLegacy<TensorType::kQ5_1>>(nb);
    case TensorType::kF32: return run.operator()<KFloat<LoadF32, ScalarF32>>(n);
    case TensorType::kF16:
      if (wide) return DriveF16Wide(n, wb, w_stride, n_rows, ab, act_stride, n_tok, out, out_stride);
      return run.operator()<KFloat<LoadF16, ScalarF16>>(n);
    case TensorType::kBF16: return run.operator()<KFloat<LoadBF16, ScalarBF16>>(n);
    default:
      if (gguf::IsLowbitType(t))
        return lowbit_avx2::GemmRows(t, n, w, w_stride, n_rows, act, act_stride, n_tok, out, out_stride, wide);
      break;
  }
}

}  // namespace rw::kernels::gemm_avx2
