// Internal to vision/attention*.cc: one (head, query block) of VisionAttention as a template over an ISA's
// tile kernels, instantiated once per twin in a file compiled for that ISA (attention.cc: scalar,
// attention_avx2.cc, attention_avx512.cc), all with -ffp-contract=off so only the explicit fused
// multiply-adds are fused.
#pragma once

#include <algorithm>
#include <cstdint>

namespace rw::vision::attn {

inline constexpr int32_t kQueryBlock = 32;  // queries per work item
inline constexpr int32_t kKeyChunk = 256;   // keys whose K (and V) stay in cache across the query block
inline constexpr int32_t kKeyAlign = 64;    // keys per tile of the packed transposed keys (padded with zeros)
inline constexpr int32_t kDimAlign = 16;  // the packed values' rows are padded to a multiple of this (zeros)
inline constexpr int32_t kTileRows = 4;   // queries per register tile

// The head's keys packed transposed in tiles of kKeyAlign keys, [n_pad / kKeyAlign][D][kKeyAlign], so a
// tile's D rows are contiguous: key j's element d at KeyTile(kt, D, j)[d·kKeyAlign].
inline const float* KeyTile(const float* kt, int32_t D, int32_t j) {
  return kt + static_cast<int64_t>(j / kKeyAlign) * D * kKeyAlign + j % kKeyAlign;
}
inline int32_t PaddedDims(int32_t D) { return (D + kDimAlign - 1) / kDimAlign * kDimAlign; }

struct Block {
  const float* q = nullptr;   // query i of the head at q + i·stride
  int64_t stride = 0;         // floats between rows of qkv (3·H·D)
  const float* kt = nullptr;  // the head's packed keys (KeyTile)
  const float* v = nullptr;   // the head's values packed: [n][Dp], the padding zero
  int32_t n = 0, n_pad = 0, D = 0, Dp = 0;
  float scale = 1.0f;
  int32_t i0 = 0, i1 = 0;  // the block's queries
  float* out = nullptr;    // query i's D outputs at out + i·out_stride
  int64_t out_stride = 0;
};

// Scratch of one thread for one block: scores [kQueryBlock][n_pad], accumulators [kQueryBlock][Dp], 1/l.
struct Scratch {
  float* s = nullptr;
  float* acc = nullptr;
  float* inv = nullptr;
};

// K provides, for a tile of `rows` <= kTileRows queries (q[r] for r < kTileRows, rows past `rows` repeat the
// last one and are not stored):
//   Scores(q, rows, kt, k0, k1, D, scale, s, s_stride): s[r·s_stride + j] for j in [k0, k1), a chunk of whole
//     kKeyAlign tiles;
//   Values(e, rows, v, k0, k1, Dp, acc): acc[r·Dp + d] for r < rows, d < Dp continued over keys [k0, k1) with
//     the weights e[r][j] (rows past `rows` may read the accumulators of row rows - 1, never write them);
//   ExpRow(s, n): s[j] = ExpApprox(s[j] - max) in place for j < n, returns l (the header's order).
template <class K>
void AttendBlock(const Block& b, const Scratch& sc) {
  const int32_t nq = b.i1 - b.i0, D = b.D;
  const float* rows[kTileRows];
  for (int32_t k0 = 0; k0 < b.n_pad; k0 += kKeyChunk) {
    const int32_t k1 = std::min(b.n_pad, k0 + kKeyChunk);
    for (int32_t t = 0; t < nq; t += kTileRows) {
      for (int32_t r = 0; r < kTileRows; ++r) rows[r] = b.q + (b.i0 + std::min(t + r, nq - 1)) * b.stride;
      K::Scores(rows, std::min(kTileRows, nq - t), b.kt, k0, k1, D, b.scale,
                sc.s + static_cast<int64_t>(t) * b.n_pad, b.n_pad);
    }
  }
  for (int32_t i = 0; i < nq; ++i)
    sc.inv[i] = 1.0f / K::ExpRow(sc.s + static_cast<int64_t>(i) * b.n_pad, b.n);
  const int32_t Dp = b.Dp;
  std::fill_n(sc.acc, static_cast<int64_t>(nq) * Dp, 0.0f);
  for (int32_t k0 = 0; k0 < b.n; k0 += kKeyChunk) {
    const int32_t k1 = std::min(b.n, k0 + kKeyChunk);
    for (int32_t t = 0; t < nq; t += kTileRows) {
      for (int32_t r = 0; r < kTileRows; ++r)
        rows[r] = sc.s + static_cast<int64_t>(std::min(t + r, nq - 1)) * b.n_pad;
      K::Values(rows, std::min(kTileRows, nq - t), b.v, k0, k1, Dp, sc.acc + static_cast<int64_t>(t) * Dp);
    }
  }
  for (int32_t i = 0; i < nq; ++i)
    for (int32_t d = 0; d < D; ++d)
      b.out[(b.i0 + i) * b.out_stride + d] = sc.acc[static_cast<int64_t>(i) * Dp + d] * sc.inv[i];
}

// The per-ISA entry points (the instantiations).
void AttendBlockScalar(const Block& b, const Scratch& sc);
void AttendBlockAvx2(const Block& b, const Scratch& sc);
void AttendBlockAvx512(const Block& b, const Scratch& sc);

// ExpRow of the AVX2 twin, shared by the AVX-512 one (vision/attention_avx2.cc).
float ExpRowAvx2(float* s, int32_t n);

// l of ExpRow from the 8 lane sums and the tail e[n8..n): the fixed order of attention.h.
inline float LaneSum(const float* lanes, const float* e, int32_t n8, int32_t n) {
  float l = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
  for (int32_t j = n8; j < n; ++j) l = l + e[j];
  return l;
}

}  // namespace rw::vision::attn
