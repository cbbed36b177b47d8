// Attention of one query head over a paged KV cache. Keys are visited in ascending position in blocks of
// kAttnBlock positions aligned to absolute positions, with an online softmax in that order, so the result for
// a query at position p depends only on q and the cached rows [0, p] — the same code for prefill and decode,
// whatever the batch, the page size or the thread split (I1).
#pragma once

#include <cstdint>

namespace rw::kernels {

inline constexpr int32_t kAttnBlock = 32;
inline constexpr int32_t kMaxHeadDim = 1024;

// One attention layer's cache as seen by one sequence: page i holds positions [i·page_size, (i+1)·page_size).
struct KvPages {
  const uint8_t* const* k_pages = nullptr;  // [n_pages] -> [page_size][row_width] elements
  const uint8_t* const* v_pages = nullptr;
  int32_t page_size = 0;
  int32_t row_width = 0;  // Hkv·D
  bool f16 = false;       // element type F16, else F32
};

// out[D] = Σ_p softmax_p(q·k_p·scale) · v_p over positions p < n_keys, for KV head kvh.
void AttendOne(const float* q, int32_t D, int32_t kvh, int32_t n_keys, const KvPages& kv, float scale,
               float* out);

}  // namespace rw::kernels
