// Attention of one query head over a paged KV cache. Keys are visited in ascending position in blocks of
// kAttnBlock positions aligned to absolute positions, with an online softmax in that order, so the result for
// a query at position p depends only on q and the cached rows [0, p] — the same code for prefill and decode,
// whatever the batch, the page size or the thread split (I1).
#pragma once

#include <cstdint>

#include "kernels/kv_quant.h"

namespace rw::kernels {

inline constexpr int32_t kAttnBlock = 32;
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

// out[D] = Σ_p softmax_p(q·k_p·scale) · v_p over positions p < n_keys, for KV head kvh. The plain,
// one-query definition: the model runs AttendGroup, whose tests require AttendOne's bits for every query.
void AttendOne(const float* q, int32_t D, int32_t kvh, int32_t n_keys, const KvPages& kv, float scale,
               float* out);

// Several queries over the same KV head of the same sequence (the query heads of a GQA group, consecutive
// tokens of a prefill chunk): each key/value block is read and converted to floats once for all of them instead
// of once per query. Every query gets exactly AttendOne's operations in AttendOne's order, so the bits are the
// same as one AttendOne call per query.
struct AttendQuery {
  const float* q = nullptr;  // [D]
  float* out = nullptr;      // [D]
  int32_t n_keys = 0;
};
inline constexpr int32_t kAttendMaxQueries = 32;
void AttendGroup(const AttendQuery* queries, int32_t n_queries, int32_t D, int32_t kvh, const KvPages& kv,
                 float scale);

}  // namespace rw::kernels
