// Internal to the vector twins of the vision attention (vision/attention_avx2.cc, attention_avx512.cc): the
// register tiles as templates over a vector type's traits V, which each twin defines in its own file (in an
// anonymous namespace, so every instantiation is local to the file compiled for its ISA):
//   V::Reg, V::kLanes, V::Zero(), V::Set1(float), V::Load(const float*), V::Store(float*, Reg), V::Mul(a, b),
//   V::Fma(a, b, c) = a·b + c fused.
// Every lane is one output element's chain of attention.h; the loops over the tile are unrolled so the
// accumulators stay in registers.
#pragma once

#include <algorithm>
#include <cstdint>

#include "vision/attention_block.h"

#define RW_ATTN_UNROLL _Pragma("GCC unroll 16")

namespace rw::vision::attn {

// Scores of keys [j, j + NK·V::kLanes), inside one kKeyAlign tile.
template <class V, int NK>
void ScoresTile(const float* const* q, int32_t rows, const float* kt, int32_t j, int32_t D, float scale,
                float* s, int32_t s_stride) {
  using R = typename V::Reg;
  R a[kTileRows][NK];
  RW_ATTN_UNROLL for (int r = 0; r < kTileRows; ++r) {
    RW_ATTN_UNROLL for (int c = 0; c < NK; ++c) a[r][c] = V::Zero();
  }
  const float* k = KeyTile(kt, D, j);
  for (int32_t d = 0; d < D; ++d, k += kKeyAlign) {
    R x[NK];
    RW_ATTN_UNROLL for (int c = 0; c < NK; ++c) x[c] = V::Load(k + c * V::kLanes);
    RW_ATTN_UNROLL for (int r = 0; r < kTileRows; ++r) {
      const R y = V::Set1(q[r][d]);
      RW_ATTN_UNROLL for (int c = 0; c < NK; ++c) a[r][c] = V::Fma(y, x[c], a[r][c]);
    }
  }
  const R vs = V::Set1(scale);
  RW_ATTN_UNROLL for (int r = 0; r < kTileRows; ++r) {
    if (r < rows) {
      RW_ATTN_UNROLL for (int c = 0; c < NK; ++c)
          V::Store(s + r * s_stride + j + c * V::kLanes, V::Mul(a[r][c], vs));
    }
  }
}

// The last nk < N vectors of keys of a tile from j.
template <class V, int N>
void ScoresRest(int nk, const float* const* q, int32_t rows, const float* kt, int32_t j, int32_t D,
                float scale, float* s, int32_t s_stride) {
  if constexpr (N > 1) {
    if (nk == N - 1) return ScoresTile<V, N - 1>(q, rows, kt, j, D, scale, s, s_stride);
    ScoresRest<V, N - 1>(nk, q, rows, kt, j, D, scale, s, s_stride);
  }
}

// K::Scores: each kKeyAlign tile of [k0, k1) in tiles of kTileRows queries x NK·V::kLanes keys, then the
// rest.
template <class V, int NK>
void ScoresTiles(const float* const* q, int32_t rows, const float* kt, int32_t k0, int32_t k1, int32_t D,
                 float scale, float* s, int32_t s_stride) {
  constexpr int32_t kStep = NK * V::kLanes;
  for (int32_t t0 = k0; t0 < k1; t0 += kKeyAlign) {
    int32_t j = t0;
    for (; j + kStep <= t0 + kKeyAlign; j += kStep) ScoresTile<V, NK>(q, rows, kt, j, D, scale, s, s_stride);
    ScoresRest<V, NK>((t0 + kKeyAlign - j) / V::kLanes, q, rows, kt, j, D, scale, s, s_stride);
  }
}

// Dims [d0, d0 + NV·V::kLanes) of K::Values.
template <class V, int NV>
void ValuesChunk(const float* const* e, int32_t rows, const float* v, int32_t k0, int32_t k1, int32_t d0,
                 int32_t Dp, float* acc) {
  using R = typename V::Reg;
  R a[kTileRows][NV];
  RW_ATTN_UNROLL for (int r = 0; r < kTileRows; ++r) {
    const float* ar = acc + std::min(r, rows - 1) * Dp + d0;
    RW_ATTN_UNROLL for (int c = 0; c < NV; ++c) a[r][c] = V::Load(ar + c * V::kLanes);
  }
  for (int32_t j = k0; j < k1; ++j) {
    const float* vj = v + static_cast<int64_t>(j) * Dp + d0;
    R x[NV];
    RW_ATTN_UNROLL for (int c = 0; c < NV; ++c) x[c] = V::Load(vj + c * V::kLanes);
    RW_ATTN_UNROLL for (int r = 0; r < kTileRows; ++r) {
      const R w = V::Set1(e[r][j]);
      RW_ATTN_UNROLL for (int c = 0; c < NV; ++c) a[r][c] = V::Fma(w, x[c], a[r][c]);
    }
  }
  RW_ATTN_UNROLL for (int r = 0; r < kTileRows; ++r) {
    if (r < rows) {
      RW_ATTN_UNROLL for (int c = 0; c < NV; ++c) V::Store(acc + r * Dp + d0 + c * V::kLanes, a[r][c]);
    }
  }
}

// The last nv < N vectors of dims from d0.
template <class V, int N>
void ValuesRest(int nv, const float* const* e, int32_t rows, const float* v, int32_t k0, int32_t k1,
                int32_t d0, int32_t Dp, float* acc) {
  if constexpr (N > 1) {
    if (nv == N - 1) return ValuesChunk<V, N - 1>(e, rows, v, k0, k1, d0, Dp, acc);
    ValuesRest<V, N - 1>(nv, e, rows, v, k0, k1, d0, Dp, acc);
  }
}

// K::Values: chunks of NV vectors of dims, then the rest (Dp is a multiple of V::kLanes).
template <class V, int NV>
void ValuesTiles(const float* const* e, int32_t rows, const float* v, int32_t k0, int32_t k1, int32_t Dp,
                 float* acc) {
  int32_t d0 = 0;
  for (; d0 + NV * V::kLanes <= Dp; d0 += NV * V::kLanes) ValuesChunk<V, NV>(e, rows, v, k0, k1, d0, Dp, acc);
  ValuesRest<V, NV>((Dp - d0) / V::kLanes, e, rows, v, k0, k1, d0, Dp, acc);
}

}  // namespace rw::vision::attn
