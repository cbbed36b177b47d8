#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <immintrin.h>

#include "base/check.h"
#include "base/cpu_features.h"
#include "kernels/dot.h"
#include "kernels/exp_approx.h"
#include "kernels/exp_approx_avx2.h"
#include "kernels/f16_row.h"

namespace rw::kernels {
namespace {

// Where one head's part of the cached rows sits: row r of a page at r·row_bytes + head_bytes.
struct RowGeometry {
  KvType type;
  size_t row_bytes, head_bytes;
  RowGeometry(KvType t, const KvPages& kv, int32_t kvh, int32_t D)
      : type(t), row_bytes(KvRowBytes(t, kv.row_width)), head_bytes(KvRowBytes(t, static_cast<int64_t>(kvh) * D)) {}
};

// The D floats of one head of row `row`: a pointer into the page for F32, else converted into tmp (exactly).
inline const float* LoadRow(const uint8_t* page, int32_t row, const RowGeometry& g, int32_t D, float* tmp) {
  const uint8_t* src = page + static_cast<size_t>(row) * g.row_bytes + g.head_bytes;
  if (g.type == KvType::kF32) return reinterpret_cast<const float*>(src);
  if (g.type == KvType::kF16) {
    HalfToFloatRow(reinterpret_cast<const uint16_t*>(src), tmp, D);  // exact, same bits as HalfToFloat per element
    return tmp;
  }
  DequantizeKvRow(g.type, src, tmp, D);
  return tmp;
}

// e[i] = ExpApprox(s[i] - m) for i < n.
__attribute__((target("avx2"))) void ExpShiftedAvx2(const float* s, float m, int32_t n, float* e) {
  int32_t i = 0;
  const __m256 vm = _mm256_set1_ps(m);
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(e + i, ExpApprox8(_mm256_sub_ps(_mm256_loadu_ps(s + i), vm)));
  for (; i < n; ++i) e[i] = ExpApprox(s[i] - m);
}

// acc[d] = acc[d] * c (a plain multiply per element, as in AttendOne).
__attribute__((target("avx2"))) void ScaleAvx2(float* acc, float c, int32_t D) {
  int32_t d = 0;
  const __m256 vc = _mm256_set1_ps(c);
  for (; d + 8 <= D; d += 8) _mm256_storeu_ps(acc + d, _mm256_mul_ps(_mm256_loadu_ps(acc + d), vc));
  for (; d < D; ++d) acc[d] *= c;
}

// acc[d] = acc[d] + e * v[d] (a multiply, then an add: no FMA, as in AttendOne).
__attribute__((target("avx2"))) void AxpyAvx2(float* acc, float e, const float* v, int32_t D) {
  int32_t d = 0;
  const __m256 ve = _mm256_set1_ps(e);
  for (; d + 8 <= D; d += 8)
    _mm256_storeu_ps(acc + d, _mm256_add_ps(_mm256_loadu_ps(acc + d), _mm256_mul_ps(ve, _mm256_loadu_ps(v + d))));
  for (; d < D; ++d) acc[d] += e * v[d];
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
  const RowGeometry kg(kv.k_type, kv, kvh, D), vg(kv.v_type, kv, kvh, D);
  for (int32_t b0 = 0; b0 < n_keys; b0 += kAttnBlock) {
    const int32_t b1 = std::min(n_keys, b0 + kAttnBlock);
    float mb = -std::numeric_limits<float>::infinity();
    for (int32_t p = b0; p < b1; ++p) {
      const uint8_t* page = kv.k_pages[p / kv.page_size];
      const float* k = LoadRow(page, p % kv.page_size, kg, D, tmp);
      s[p - b0] = DotF32(q, k, D) * scale;
      mb = std::max(mb, s[p - b0]);
    }
    const float m_new = std::max(m, mb);
    const float corr = ExpApprox(m - m_new);  // 0 on the first block (m = -inf)
    l *= corr;
    for (int32_t d = 0; d < D; ++d) acc[d] *= corr;
    for (int32_t p = b0; p < b1; ++p) {
      const float e = ExpApprox(s[p - b0] - m_new);
      l += e;
      const uint8_t* page = kv.v_pages[p / kv.page_size];
      const float* v = LoadRow(page, p % kv.page_size, vg, D, tmp);
      for (int32_t d = 0; d < D; ++d) acc[d] += e * v[d];
    }
    m = m_new;
  }
  const float inv = n_keys > 0 ? 1.0f / l : 0.0f;
  for (int32_t d = 0; d < D; ++d) out[d] = acc[d] * inv;
}

void AttendGroup(const AttendQuery* queries, int32_t n_queries, int32_t D, int32_t kvh, const KvPages& kv,
                 float scale) {
  REWIND_CHECK(D <= kMaxHeadDim && n_queries >= 0 && n_queries <= kAttendMaxQueries);
  thread_local std::vector<float> acc_buf, kv_buf;
  acc_buf.resize(static_cast<size_t>(n_queries) * D);
  kv_buf.resize(static_cast<size_t>(2) * kAttnBlock * D);
  float* const kb = kv_buf.data();                         // [kAttnBlock][D] keys of the block, as floats
  float* const vb = kv_buf.data() + kAttnBlock * D;        // [kAttnBlock][D] values
  float m[kAttendMaxQueries], l[kAttendMaxQueries], s[kAttnBlock], e[kAttnBlock];
  const float* krow[kAttnBlock];
  const float* vrow[kAttnBlock];
  int32_t max_keys = 0;
  for (int32_t j = 0; j < n_queries; ++j) {
    std::fill_n(acc_buf.data() + static_cast<size_t>(j) * D, D, 0.0f);
    m[j] = -std::numeric_limits<float>::infinity();
    l[j] = 0.0f;
    max_keys = std::max(max_keys, queries[j].n_keys);
  }
  const RowGeometry kg(kv.k_type, kv, kvh, D), vg(kv.v_type, kv, kvh, D);
  for (int32_t b0 = 0; b0 < max_keys; b0 += kAttnBlock) {
    const int32_t b1 = std::min(max_keys, b0 + kAttnBlock);
    for (int32_t p = b0; p < b1; ++p) {  // each row of the block once, for every query
      krow[p - b0] = LoadRow(kv.k_pages[p / kv.page_size], p % kv.page_size, kg, D, kb + (p - b0) * D);
      vrow[p - b0] = LoadRow(kv.v_pages[p / kv.page_size], p % kv.page_size, vg, D, vb + (p - b0) * D);
    }
    for (int32_t j = 0; j < n_queries; ++j) {
      const int32_t e1 = std::min(queries[j].n_keys, b1);
      if (e1 <= b0) continue;  // this query's keys ended before the block
      // AttendOne's block step: the same operations, the exp and the updates vectorised (same bits).
      const float* q = queries[j].q;
      float* acc = acc_buf.data() + static_cast<size_t>(j) * D;
      float mb = -std::numeric_limits<float>::infinity();
      for (int32_t p = b0; p < e1; ++p) {
        s[p - b0] = DotF32(q, krow[p - b0], D) * scale;
        mb = std::max(mb, s[p - b0]);
      }
      const float m_new = std::max(m[j], mb);
      const float corr = ExpApprox(m[j] - m_new);
      l[j] *= corr;
      const int32_t nb = e1 - b0;
      if (CpuHasAvx2Fma()) {
        ScaleAvx2(acc, corr, D);
        ExpShiftedAvx2(s, m_new, nb, e);
        for (int32_t p = 0; p < nb; ++p) {
          l[j] += e[p];
          AxpyAvx2(acc, e[p], vrow[p], D);
        }
      } else {
        for (int32_t d = 0; d < D; ++d) acc[d] *= corr;
        for (int32_t p = 0; p < nb; ++p) {
          e[p] = ExpApprox(s[p] - m_new);
          l[j] += e[p];
          const float* v = vrow[p];
          for (int32_t d = 0; d < D; ++d) acc[d] += e[p] * v[d];
        }
      }
      m[j] = m_new;
    }
  }
  for (int32_t j = 0; j < n_queries; ++j) {
    const float* acc = acc_buf.data() + static_cast<size_t>(j) * D;
    const float inv = queries[j].n_keys > 0 ? 1.0f / l[j] : 0.0f;
    for (int32_t d = 0; d < D; ++d) queries[j].out[d] = acc[d] * inv;
  }
}

}  // namespace rw::kernels
