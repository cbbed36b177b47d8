#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <immintrin.h>

#include "base/check.h"
#include "base/cpu_features.h"
#include "kernels/attention_avx512.h"
#include "kernels/attention_reduce.h"
#include "kernels/exp_approx.h"
#include "kernels/exp_approx_avx2.h"
#include "kernels/f16_row.h"

namespace rw::kernels {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr int kTileQ = 4;  // queries per register tile (scores: 4 queries x 2 keys; values: 4 queries x 16 dims)

const bool kFast = CpuHasAvx2Fma();

// 0 (portable), 256 (AVX2 + FMA) or 512 (AVX-512): the same bits (attention.h).
int BestWidth() { return kFast ? (CpuHasAvx512() ? 512 : 256) : 0; }

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

// ---- scores: s = dot(q, k)·scale in the lane order of attention.h ------------------------------------------

// The tail d in [D8, D) of one dot product: a fused chain from 0.
inline float DotTail(const float* q, const float* k, int32_t D8, int32_t D) {
  float t = 0.0f;
  for (int32_t d = D8; d < D; ++d) t = std::fma(q[d], k[d], t);
  return t;
}

// The portable twin: the 8 lanes emulated with std::fma, the same tree.
float ScorePortable(const float* q, const float* k, int32_t D, float scale) {
  const int32_t D8 = D & ~7;
  float x[8] = {};
  for (int32_t d = 0; d < D8; d += 8)
    for (int l = 0; l < 8; ++l) x[l] = std::fma(q[d + l], k[d + l], x[l]);
  float r = ((x[0] + x[1]) + (x[2] + x[3])) + ((x[4] + x[5]) + (x[6] + x[7]));
  if (D8 < D) r = r + DotTail(q, k, D8, D);
  return r * scale;
}

// out[2i + c] = score of query q[i] against key k[c], i < 4, c < 2.
__attribute__((target("avx2,fma"))) void ScoreTileAvx2(const float* const* q, const float* k0, const float* k1,
                                                       int32_t D, float scale, float* out) {
  const int32_t D8 = D & ~7;
  __m256 a00 = _mm256_setzero_ps(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00, a30 = a00, a31 = a00;
  for (int32_t d = 0; d < D8; d += 8) {
    const __m256 x0 = _mm256_loadu_ps(k0 + d), x1 = _mm256_loadu_ps(k1 + d);
    __m256 y = _mm256_loadu_ps(q[0] + d);
    a00 = _mm256_fmadd_ps(y, x0, a00);
    a01 = _mm256_fmadd_ps(y, x1, a01);
    y = _mm256_loadu_ps(q[1] + d);
    a10 = _mm256_fmadd_ps(y, x0, a10);
    a11 = _mm256_fmadd_ps(y, x1, a11);
    y = _mm256_loadu_ps(q[2] + d);
    a20 = _mm256_fmadd_ps(y, x0, a20);
    a21 = _mm256_fmadd_ps(y, x1, a21);
    y = _mm256_loadu_ps(q[3] + d);
    a30 = _mm256_fmadd_ps(y, x0, a30);
    a31 = _mm256_fmadd_ps(y, x1, a31);
  }
  __m256 r = AttnReduce8(a00, a01, a10, a11, a20, a21, a30, a31);
  if (D8 < D) {
    float t[8];
    for (int i = 0; i < 4; ++i) {
      t[2 * i] = DotTail(q[i], k0, D8, D);
      t[2 * i + 1] = DotTail(q[i], k1, D8, D);
    }
    r = _mm256_add_ps(r, _mm256_loadu_ps(t));
  }
  _mm256_storeu_ps(out, _mm256_mul_ps(r, _mm256_set1_ps(scale)));
}

// s[i·kAttnBlock + p] = score of queries[i] (i < nq <= 4) against krow[p] (p < nk). q holds 4 pointers: the
// caller pads a short tile by repeating its last query, so the AVX2 tile always reads 4 real rows.
void ScoreTile(int width, const float* const* q, int32_t nq, const float* const* krow, int32_t nk, int32_t D,
               float scale, float* s) {
  if (width == 0) {
    for (int32_t i = 0; i < nq; ++i)
      for (int32_t p = 0; p < nk; ++p) s[i * kAttnBlock + p] = ScorePortable(q[i], krow[p], D, scale);
    return;
  }
  float out[8];
  for (int32_t p = 0; p < nk; p += 2) {
    const float* k1 = krow[std::min(p + 1, nk - 1)];
    ScoreTileAvx2(q, krow[p], k1, D, scale, out);
    for (int32_t i = 0; i < nq; ++i) {
      s[i * kAttnBlock + p] = out[2 * i];
      if (p + 1 < nk) s[i * kAttnBlock + p + 1] = out[2 * i + 1];
    }
  }
}

// ---- values: acc = acc·c, then acc = fma(e_p, v_p, acc) in ascending p ------------------------------------

// The D mod 8 tail of ValueTile: scalar, the same operations.
void ValueTail(float* acc, float corr, const float* e, const float* const* vrow, int32_t nb, int32_t d0, int32_t D) {
  for (int32_t d = d0; d < D; ++d) {
    float x = acc[d] * corr;
    for (int32_t p = 0; p < nb; ++p) x = std::fma(e[p], vrow[p][d], x);
    acc[d] = x;
  }
}

// Four queries: 16 dims at a time, the 8 accumulators in registers over the block's keys.
__attribute__((target("avx2,fma"))) void ValueTile4Avx2(float* const* acc, const float* corr, const float* const* e,
                                                        const float* const* vrow, int32_t nb, int32_t D) {
  const int32_t D8 = D & ~7;
  const __m256 c0 = _mm256_set1_ps(corr[0]), c1 = _mm256_set1_ps(corr[1]), c2 = _mm256_set1_ps(corr[2]),
               c3 = _mm256_set1_ps(corr[3]);
  const float *e0 = e[0], *e1 = e[1], *e2 = e[2], *e3 = e[3];
  int32_t d0 = 0;
  for (; d0 + 16 <= D8; d0 += 16) {
    __m256 a0 = _mm256_mul_ps(_mm256_loadu_ps(acc[0] + d0), c0), b0 = _mm256_mul_ps(_mm256_loadu_ps(acc[0] + d0 + 8), c0);
    __m256 a1 = _mm256_mul_ps(_mm256_loadu_ps(acc[1] + d0), c1), b1 = _mm256_mul_ps(_mm256_loadu_ps(acc[1] + d0 + 8), c1);
    __m256 a2 = _mm256_mul_ps(_mm256_loadu_ps(acc[2] + d0), c2), b2 = _mm256_mul_ps(_mm256_loadu_ps(acc[2] + d0 + 8), c2);
    __m256 a3 = _mm256_mul_ps(_mm256_loadu_ps(acc[3] + d0), c3), b3 = _mm256_mul_ps(_mm256_loadu_ps(acc[3] + d0 + 8), c3);
    for (int32_t p = 0; p < nb; ++p) {
      const float* v = vrow[p] + d0;
      const __m256 v0 = _mm256_loadu_ps(v), v1 = _mm256_loadu_ps(v + 8);
      __m256 w = _mm256_broadcast_ss(e0 + p);
      a0 = _mm256_fmadd_ps(w, v0, a0);
      b0 = _mm256_fmadd_ps(w, v1, b0);
      w = _mm256_broadcast_ss(e1 + p);
      a1 = _mm256_fmadd_ps(w, v0, a1);
      b1 = _mm256_fmadd_ps(w, v1, b1);
      w = _mm256_broadcast_ss(e2 + p);
      a2 = _mm256_fmadd_ps(w, v0, a2);
      b2 = _mm256_fmadd_ps(w, v1, b2);
      w = _mm256_broadcast_ss(e3 + p);
      a3 = _mm256_fmadd_ps(w, v0, a3);
      b3 = _mm256_fmadd_ps(w, v1, b3);
    }
    _mm256_storeu_ps(acc[0] + d0, a0);
    _mm256_storeu_ps(acc[0] + d0 + 8, b0);
    _mm256_storeu_ps(acc[1] + d0, a1);
    _mm256_storeu_ps(acc[1] + d0 + 8, b1);
    _mm256_storeu_ps(acc[2] + d0, a2);
    _mm256_storeu_ps(acc[2] + d0 + 8, b2);
    _mm256_storeu_ps(acc[3] + d0, a3);
    _mm256_storeu_ps(acc[3] + d0 + 8, b3);
  }
  for (; d0 < D8; d0 += 8) {
    __m256 a0 = _mm256_mul_ps(_mm256_loadu_ps(acc[0] + d0), c0), a1 = _mm256_mul_ps(_mm256_loadu_ps(acc[1] + d0), c1);
    __m256 a2 = _mm256_mul_ps(_mm256_loadu_ps(acc[2] + d0), c2), a3 = _mm256_mul_ps(_mm256_loadu_ps(acc[3] + d0), c3);
    for (int32_t p = 0; p < nb; ++p) {
      const __m256 v0 = _mm256_loadu_ps(vrow[p] + d0);
      a0 = _mm256_fmadd_ps(_mm256_broadcast_ss(e0 + p), v0, a0);
      a1 = _mm256_fmadd_ps(_mm256_broadcast_ss(e1 + p), v0, a1);
      a2 = _mm256_fmadd_ps(_mm256_broadcast_ss(e2 + p), v0, a2);
      a3 = _mm256_fmadd_ps(_mm256_broadcast_ss(e3 + p), v0, a3);
    }
    _mm256_storeu_ps(acc[0] + d0, a0);
    _mm256_storeu_ps(acc[1] + d0, a1);
    _mm256_storeu_ps(acc[2] + d0, a2);
    _mm256_storeu_ps(acc[3] + d0, a3);
  }
  for (int i = 0; i < 4; ++i) ValueTail(acc[i], corr[i], e[i], vrow, nb, D8, D);
}

// One query: 32 dims at a time (4 accumulators).
__attribute__((target("avx2,fma"))) void ValueOneAvx2(float* acc, float corr, const float* e, const float* const* vrow,
                                                      int32_t nb, int32_t D) {
  const int32_t D8 = D & ~7;
  const __m256 c = _mm256_set1_ps(corr);
  int32_t d0 = 0;
  for (; d0 + 32 <= D8; d0 += 32) {
    __m256 a0 = _mm256_mul_ps(_mm256_loadu_ps(acc + d0), c), a1 = _mm256_mul_ps(_mm256_loadu_ps(acc + d0 + 8), c);
    __m256 a2 = _mm256_mul_ps(_mm256_loadu_ps(acc + d0 + 16), c), a3 = _mm256_mul_ps(_mm256_loadu_ps(acc + d0 + 24), c);
    for (int32_t p = 0; p < nb; ++p) {
      const float* v = vrow[p] + d0;
      const __m256 w = _mm256_broadcast_ss(e + p);
      a0 = _mm256_fmadd_ps(w, _mm256_loadu_ps(v), a0);
      a1 = _mm256_fmadd_ps(w, _mm256_loadu_ps(v + 8), a1);
      a2 = _mm256_fmadd_ps(w, _mm256_loadu_ps(v + 16), a2);
      a3 = _mm256_fmadd_ps(w, _mm256_loadu_ps(v + 24), a3);
    }
    _mm256_storeu_ps(acc + d0, a0);
    _mm256_storeu_ps(acc + d0 + 8, a1);
    _mm256_storeu_ps(acc + d0 + 16, a2);
    _mm256_storeu_ps(acc + d0 + 24, a3);
  }
  for (; d0 < D8; d0 += 8) {
    __m256 a0 = _mm256_mul_ps(_mm256_loadu_ps(acc + d0), c);
    for (int32_t p = 0; p < nb; ++p) a0 = _mm256_fmadd_ps(_mm256_broadcast_ss(e + p), _mm256_loadu_ps(vrow[p] + d0), a0);
    _mm256_storeu_ps(acc + d0, a0);
  }
  ValueTail(acc, corr, e, vrow, nb, D8, D);
}

void ValueOne(int width, float* acc, float corr, const float* e, const float* const* vrow, int32_t nb, int32_t D) {
  if (width == 512) return attention_avx512::ValueOne(acc, corr, e, vrow, nb, D);
  if (width == 256) return ValueOneAvx2(acc, corr, e, vrow, nb, D);
  ValueTail(acc, corr, e, vrow, nb, 0, D);
}

// e[i] = ExpApprox(s[i] - m) for i < n.
__attribute__((target("avx2"))) void ExpShiftedAvx2(const float* s, float m, int32_t n, float* e) {
  int32_t i = 0;
  const __m256 vm = _mm256_set1_ps(m);
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(e + i, ExpApprox8(_mm256_sub_ps(_mm256_loadu_ps(s + i), vm)));
  for (; i < n; ++i) e[i] = ExpApprox(s[i] - m);
}

// ---- one segment ---------------------------------------------------------------------------------------------

struct Scratch {
  std::vector<float> kv;    // [2][kAttnBlock][D]: the block's keys (packed by lane groups at width 512), then values
  std::vector<float> row;   // [D]: one dequantised key row before packing
  std::vector<float> s;     // [n rounded up to kTileQ][kAttnBlock] scores, then weights e
  std::vector<float> corr;
  std::vector<float> part;   // [n][D + 2] AttendGroup's partial of the current segment
  std::vector<float> total;  // [n][D + 2] the merged segments
};

Scratch& ThreadScratch(int32_t n, int32_t D) {
  thread_local Scratch sc;
  const size_t pf = static_cast<size_t>(AttnPartialFloats(D));
  sc.kv.resize(static_cast<size_t>(2) * kAttnBlock * D);
  sc.row.resize(D);
  sc.s.resize(static_cast<size_t>((n + kTileQ - 1) / kTileQ * kTileQ) * kAttnBlock);
  sc.corr.resize(n);
  sc.part.resize(static_cast<size_t>(n) * pf);
  sc.total.resize(static_cast<size_t>(n) * pf);
  return sc;
}

// Keys [b0, b0 + nk) of the block packed by lane groups into pk (width 512, D % 8 == 0), slots up to the next
// multiple of 8 zero.
void PackKeys(const KvPages& kv, const RowGeometry& g, int32_t b0, int32_t nk, int32_t D, float* pk, float* tmp) {
  for (int32_t p = 0; p < nk; ++p) {
    const int32_t pos = b0 + p;
    const uint8_t* src = kv.k_pages[pos / kv.page_size] + static_cast<size_t>(pos % kv.page_size) * g.row_bytes +
                         g.head_bytes;
    if (g.type == KvType::kF32) {
      attention_avx512::PackKeyF32(reinterpret_cast<const float*>(src), D, p, pk);
    } else if (g.type == KvType::kF16) {
      attention_avx512::PackKeyF16(reinterpret_cast<const uint16_t*>(src), D, p, pk);
    } else {
      DequantizeKvRow(g.type, src, tmp, D);
      attention_avx512::PackKeyF32(tmp, D, p, pk);
    }
  }
  if (nk % 8 != 0) {
    std::fill_n(tmp, D, 0.0f);
    for (int32_t p = nk; p % 8 != 0; ++p) attention_avx512::PackKeyF32(tmp, D, p, pk);
  }
}

// The partial state of segment `seg` of every query into part[j·(D + 2)]: acc[D], m, l. Per block: the scores
// and the online softmax step of every query tile while the keys are in cache, then the value updates.
void RunSegment(int width, const AttendQuery* queries, int32_t n, int32_t D, int32_t kvh, const KvPages& kv,
                float scale, int32_t seg, float* part, Scratch& sc) {
  REWIND_CHECK(D > 0 && D <= kMaxHeadDim);
  const int32_t pf = AttnPartialFloats(D);
  const int32_t seg0 = seg * kAttnSegment;
  int32_t max_keys = 0;
  for (int32_t j = 0; j < n; ++j) {
    float* pj = part + static_cast<size_t>(j) * pf;
    std::fill_n(pj, D, 0.0f);
    pj[D] = kNegInf;
    pj[D + 1] = 0.0f;
    max_keys = std::max(max_keys, queries[j].n_keys);
  }
  const bool packed = width == 512 && D % 8 == 0;
  if (width == 512 && !packed) width = 256;  // a head dim with a tail: the 256-bit tiles (the same bits)
  const int32_t seg1 = std::min(max_keys, seg0 + kAttnSegment);
  float* const kb = sc.kv.data();                   // [kAttnBlock][D]
  float* const vb = sc.kv.data() + kAttnBlock * D;  // [kAttnBlock][D]
  float* const s = sc.s.data();
  const float* krow[kAttnBlock];
  const float* vrow[kAttnBlock];
  const RowGeometry kg(kv.k_type, kv, kvh, D), vg(kv.v_type, kv, kvh, D);
  for (int32_t b0 = seg0; b0 < seg1; b0 += kAttnBlock) {
    const int32_t b1 = std::min(seg1, b0 + kAttnBlock), nk = b1 - b0;
    // Each row of the block once, for every query.
    if (packed) PackKeys(kv, kg, b0, nk, D, kb, sc.row.data());
    for (int32_t p = b0; p < b1; ++p) {
      if (!packed) krow[p - b0] = LoadRow(kv.k_pages[p / kv.page_size], p % kv.page_size, kg, D, kb + (p - b0) * D);
      vrow[p - b0] = LoadRow(kv.v_pages[p / kv.page_size], p % kv.page_size, vg, D, vb + (p - b0) * D);
    }
    auto keys_of = [&](int32_t j) { return std::clamp(queries[j].n_keys - b0, 0, nk); };
    // Tiles of kTileQ queries (usually one token's heads): the most keys of the tile's queries in the block.
    auto tile_keys_of = [&](int32_t j0, int32_t j1) {
      int32_t t = 0;
      for (int32_t j = j0; j < j1; ++j) t = std::max(t, keys_of(j));
      return t;
    };
    for (int32_t j0 = 0; j0 < n; j0 += kTileQ) {
      const int32_t j1 = std::min(n, j0 + kTileQ);
      const int32_t tile_keys = tile_keys_of(j0, j1);
      if (tile_keys == 0) continue;
      const float* qs[kTileQ];
      for (int32_t i = 0; i < kTileQ; ++i) qs[i] = queries[std::min(j0 + i, j1 - 1)].q;  // padding repeats the last
      float* const sj0 = s + static_cast<size_t>(j0) * kAttnBlock;
      if (packed) {
        for (int32_t p0 = 0; p0 < tile_keys; p0 += 8) attention_avx512::ScoreTile4x8(qs, kb, p0, D, scale, sj0 + p0);
      } else {
        ScoreTile(width, qs, j1 - j0, krow, tile_keys, D, scale, sj0);
      }
      // The online softmax step per query, in ascending p.
      for (int32_t j = j0; j < j1; ++j) {
        const int32_t nb = keys_of(j);
        if (nb == 0) continue;
        float* sj = s + static_cast<size_t>(j) * kAttnBlock;
        float* pj = part + static_cast<size_t>(j) * pf;
        float mb = kNegInf;
        for (int32_t p = 0; p < nb; ++p) mb = std::max(mb, sj[p]);
        const float m_new = std::max(pj[D], mb);
        const float c = ExpApprox(pj[D] - m_new);  // 0 on the first block (m = -inf)
        float l = pj[D + 1] * c;
        if (width != 0) {
          ExpShiftedAvx2(sj, m_new, nb, sj);
        } else {
          for (int32_t p = 0; p < nb; ++p) sj[p] = ExpApprox(sj[p] - m_new);
        }
        for (int32_t p = 0; p < nb; ++p) l += sj[p];
        pj[D] = m_new;
        pj[D + 1] = l;
        sc.corr[j] = c;
      }
    }
    for (int32_t j0 = 0; j0 < n; j0 += kTileQ) {
      const int32_t j1 = std::min(n, j0 + kTileQ);
      const int32_t tile_keys = tile_keys_of(j0, j1);
      if (tile_keys == 0) continue;
      bool full = j1 - j0 == kTileQ;
      for (int32_t j = j0; j < j1; ++j) full = full && keys_of(j) == tile_keys;
      if (full && width != 0) {
        float* acc[kTileQ];
        const float* e[kTileQ];
        for (int i = 0; i < kTileQ; ++i) {
          acc[i] = part + static_cast<size_t>(j0 + i) * pf;
          e[i] = s + static_cast<size_t>(j0 + i) * kAttnBlock;
        }
        if (width == 512) {
          attention_avx512::ValueTile4(acc, sc.corr.data() + j0, e, vrow, tile_keys, D);
        } else {
          ValueTile4Avx2(acc, sc.corr.data() + j0, e, vrow, tile_keys, D);
        }
      } else {
        for (int32_t j = j0; j < j1; ++j)
          if (keys_of(j) > 0)
            ValueOne(width, part + static_cast<size_t>(j) * pf, sc.corr[j], s + static_cast<size_t>(j) * kAttnBlock,
                     vrow, keys_of(j), D);
      }
    }
  }
}

// (M, L, ACC) = merge of (M, L, ACC) and a segment's (m, l, acc): M' = max(M, m), a = exp(M - M'),
// b = exp(m - M'), L = L·a + l·b, ACC = ACC·a + acc·b (multiplies, then an add).
__attribute__((target("avx2"))) void MergeAvx2(float* total, const float* seg, int32_t D, float a, float b) {
  int32_t d = 0;
  const __m256 va = _mm256_set1_ps(a), vb = _mm256_set1_ps(b);
  for (; d + 8 <= D; d += 8)
    _mm256_storeu_ps(total + d, _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(total + d), va),
                                              _mm256_mul_ps(_mm256_loadu_ps(seg + d), vb)));
  for (; d < D; ++d) total[d] = total[d] * a + seg[d] * b;
}

void Merge(float* total, const float* seg, int32_t D) {
  const float m = std::max(total[D], seg[D]);
  const float a = ExpApprox(total[D] - m), b = ExpApprox(seg[D] - m);
  if (kFast) {
    MergeAvx2(total, seg, D, a, b);
  } else {
    for (int32_t d = 0; d < D; ++d) total[d] = total[d] * a + seg[d] * b;
  }
  total[D + 1] = total[D + 1] * a + seg[D + 1] * b;
  total[D] = m;
}

void InitTotal(float* total, int32_t D) {
  std::fill_n(total, D, 0.0f);
  total[D] = kNegInf;
  total[D + 1] = 0.0f;
}

void Finish(const AttendQuery& q, const float* total, int32_t D) {
  const float inv = q.n_keys > 0 ? 1.0f / total[D + 1] : 0.0f;
  for (int32_t d = 0; d < D; ++d) q.out[d] = total[d] * inv;
}

}  // namespace

void AttendGroup(const AttendQuery* queries, int32_t n_queries, int32_t D, int32_t kvh, const KvPages& kv,
                 float scale) {
  AttendGroupSimd(BestWidth(), queries, n_queries, D, kvh, kv, scale);
}

void AttendGroupSimd(int width, const AttendQuery* queries, int32_t n_queries, int32_t D, int32_t kvh,
                     const KvPages& kv, float scale) {
  REWIND_CHECK(D > 0 && D <= kMaxHeadDim && n_queries >= 0);
  REWIND_CHECK(width == 0 || width == 256 || width == 512);
  if (n_queries == 0) return;
  Scratch& sc = ThreadScratch(n_queries, D);
  const int32_t pf = AttnPartialFloats(D);
  int32_t max_keys = 0;
  for (int32_t j = 0; j < n_queries; ++j) {
    InitTotal(sc.total.data() + static_cast<size_t>(j) * pf, D);
    max_keys = std::max(max_keys, queries[j].n_keys);
  }
  for (int32_t seg = 0; seg < AttnSegments(max_keys); ++seg) {
    RunSegment(width, queries, n_queries, D, kvh, kv, scale, seg, sc.part.data(), sc);
    for (int32_t j = 0; j < n_queries; ++j)
      if (queries[j].n_keys > seg * kAttnSegment)
        Merge(sc.total.data() + static_cast<size_t>(j) * pf, sc.part.data() + static_cast<size_t>(j) * pf, D);
  }
  for (int32_t j = 0; j < n_queries; ++j) Finish(queries[j], sc.total.data() + static_cast<size_t>(j) * pf, D);
}

void AttendOne(const float* q, int32_t D, int32_t kvh, int32_t n_keys, const KvPages& kv, float scale,
               float* out) {
  const AttendQuery one{q, out, n_keys};
  AttendGroup(&one, 1, D, kvh, kv, scale);
}

void AttendSegment(const AttendQuery* queries, int32_t n_queries, int32_t D, int32_t kvh, const KvPages& kv,
                   float scale, int32_t seg, float* partial) {
  REWIND_CHECK(D > 0 && D <= kMaxHeadDim && n_queries >= 0 && seg >= 0);
  if (n_queries == 0) return;
  RunSegment(BestWidth(), queries, n_queries, D, kvh, kv, scale, seg, partial, ThreadScratch(n_queries, D));
}

void AttendCombine(const AttendQuery* queries, int32_t n_queries, int32_t D, const float* const* partials,
                   int32_t n_seg) {
  REWIND_CHECK(D > 0 && D <= kMaxHeadDim && n_queries >= 0);
  const int32_t pf = AttnPartialFloats(D);
  std::vector<float> total(pf);
  for (int32_t j = 0; j < n_queries; ++j) {
    InitTotal(total.data(), D);
    for (int32_t seg = 0; seg < n_seg; ++seg)
      if (queries[j].n_keys > seg * kAttnSegment) Merge(total.data(), partials[seg] + static_cast<size_t>(j) * pf, D);
    Finish(queries[j], total.data(), D);
  }
}

}  // namespace rw::kernels
