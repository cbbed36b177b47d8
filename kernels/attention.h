// Attention of query heads over a paged KV cache (docs/long-context.md). The reduction of one query is defined
// at absolute positions, so the result for a query at position p depends only on q and the cached rows [0, p]
// — the same code for prefill and decode, whatever the batch, the page size, the query tile or the thread split
// (I1):
//   - keys are cut into segments of kAttnSegment positions and each segment into blocks of kAttnBlock
//     positions, both aligned to absolute positions;
//   - inside a segment, blocks in ascending order with an online softmax: score s = dot(q, k)·scale, where dot
//     is 8 lanes (lane l sums d ≡ l mod 8 with fused multiply-adds in ascending d), then ((l0 + l1) + (l2 + l3))
//     + ((l4 + l5) + (l6 + l7)), then plus the D mod 8 tail (a fused chain); per block m' = max(m, block max),
//     c = exp(m - m'), l = l·c + Σ e_p in order, acc = acc·c, then acc = fma(e_p, v_p, acc) in ascending p;
//   - segments merged in ascending order into (M, L, ACC) (AttendCombine's formula), out = ACC · (1 / L).
// Queries of one GQA group and of consecutive tokens share every K/V block: it is read and converted to floats
// once for all of them, and scores and value updates are computed in register tiles of several queries x keys,
// each output element still getting exactly the operations above (exp is ExpApprox, the same bits scalar and
// vector). Quantised rows are dequantised exactly into a block buffer inside the kernel (no copy of the cache).
#pragma once

#include <cstdint>

#include "kernels/kv_quant.h"

namespace rw::kernels {

inline constexpr int32_t kAttnBlock = 32;
inline constexpr int32_t kAttnSegment = 512;  // a multiple of kAttnBlock
inline constexpr int32_t kMaxHeadDim = 1024;

// One attention layer's cache as seen by one sequence: page i holds positions [i·page_size, (i+1)·page_size).
// A row is row_width elements of its type (kernels/kv_quant.h): KvRowBytes(type, row_width) bytes, head h at byte
// KvRowBytes(type, h·D). Quantised rows are dequantised exactly to floats before use (same bits on every path).
struct KvPages {
  const uint8_t* const* k_pages = nullptr;  // [n_pages] -> [page_size][row bytes]
  const uint8_t* const* v_pages = nullptr;
  int32_t page_size = 0;
  int32_t row_width = 0;  // Hkv·D
  KvType k_type = KvType::kF32;
  KvType v_type = KvType::kF32;
};

// out[D] = Σ_p softmax_p(q·k_p·scale) · v_p over positions p < n_keys, for KV head kvh: the one-query form of
// AttendGroup (the same bits).
void AttendOne(const float* q, int32_t D, int32_t kvh, int32_t n_keys, const KvPages& kv, float scale,
               float* out);

// Several queries over the same KV head of the same sequence (the query heads of a GQA group, consecutive tokens
// of a prefill chunk): each key/value block is read and converted once for all of them. Every query gets the
// bits of its own AttendOne call. Any number of queries; keys up to the largest n_keys must be in the pages.
struct AttendQuery {
  const float* q = nullptr;  // [D]
  float* out = nullptr;      // [D]
  int32_t n_keys = 0;
};
void AttendGroup(const AttendQuery* queries, int32_t n_queries, int32_t D, int32_t kvh, const KvPages& kv,
                 float scale);

// AttendGroup on the tiles of one SIMD width, for tests: 0 (portable), 256 (AVX2 + FMA) or 512 (AVX-512; keys
// packed by lane groups, kernels/attention_avx512.h); the caller checks the CPU. Every width gives the same bits.
void AttendGroupSimd(int width, const AttendQuery* queries, int32_t n_queries, int32_t D, int32_t kvh,
                     const KvPages& kv, float scale);

// The same result split over segments, for spreading one query group's long context over threads (decode at
// depth): AttendSegment writes the partial state of segment `seg` (keys [seg·kAttnSegment, ...)) of every query
// into partial[j·AttnPartialFloats(D) ...] (a query without keys in the segment gets an empty state);
// AttendCombine merges segments 0..n_seg-1 (partials[s] for segment s) in order and writes out. Segments past a
// query's keys are ignored. AttendSegment for every s, then AttendCombine, gives AttendGroup's bits.
inline int32_t AttnSegments(int32_t n_keys) { return (n_keys + kAttnSegment - 1) / kAttnSegment; }
inline int32_t AttnPartialFloats(int32_t D) { return D + 2; }  // acc[D], m, l
void AttendSegment(const AttendQuery* queries, int32_t n_queries, int32_t D, int32_t kvh, const KvPages& kv,
                   float scale, int32_t seg, float* partial);
void AttendCombine(const AttendQuery* queries, int32_t n_queries, int32_t D, const float* const* partials,
                   int32_t n_seg);

}  // namespace rw::kernels
