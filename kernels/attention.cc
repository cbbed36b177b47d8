#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/check.h"
#include "kernels/dot.h"
#include "kernels/f16_row.h"

namespace rw::kernels {
namespace {

inline const float* LoadRow(const uint8_t* page, int32_t row, const KvPages& kv, int32_t off, int32_t D,
                            float* tmp) {
  if (!kv.f16) {
    return reinterpret_cast<const float*>(page) + static_cast<int64_t>(row) * kv.row_width + off;
  }
  const uint16_t* h = reinterpret_cast<const uint16_t*>(page) + static_cast<int64_t>(row) * kv.row_width + off;
  HalfToFloatRow(h, tmp, D);  // exact, same bits as HalfToFloat per element
  return tmp;
}

}  // namespace

void AttendOne(const float* q, int32_t D, int32_t kvh, int32_t n_keys, const KvPages& kv, float scale,
               float* out) {
  REWIND_CHECK(D <= kMaxHeadDim);
  float acc[kMaxHeadDim];
  float tmp[kMaxHeadDim];
  float s[kAttnBlock];
  for (int32_t d = 0; d < D; ++d) acc[d] = 0.0f;
  float m = -std::numeric_limits<float>::infinity();
  float l = 0.0f;
  const int32_t off = kvh * D;
  for (int32_t b0 = 0; b0 < n_keys; b0 += kAttnBlock) {
    const int32_t b1 = std::min(n_keys, b0 + kAttnBlock);
    float mb = -std::numeric_limits<float>::infinity();
    for (int32_t p = b0; p < b1; ++p) {
      const uint8_t* page = kv.k_pages[p / kv.page_size];
      const float* k = LoadRow(page, p % kv.page_size, kv, off, D, tmp);
      s[p - b0] = DotF32(q, k, D) * scale;
      mb = std::max(mb, s[p - b0]);
    }
    const float m_new = std::max(m, mb);
    const float corr = std::exp(m - m_new);  // 0 on the first block (m = -inf)
    l *= corr;
    for (int32_t d = 0; d < D; ++d) acc[d] *= corr;
    for (int32_t p = b0; p < b1; ++p) {
      const float e = std::exp(s[p - b0] - m_new);
      l += e;
      const uint8_t* page = kv.v_pages[p / kv.page_size];
      const float* v = LoadRow(page, p % kv.page_size, kv, off, D, tmp);
      for (int32_t d = 0; d < D; ++d) acc[d] += e * v[d];
    }
    m = m_new;
  }
  const float inv = n_keys > 0 ? 1.0f / l : 0.0f;
  for (int32_t d = 0; d < D; ++d) out[d] = acc[d] * inv;
}

}  // namespace rw::kernels
