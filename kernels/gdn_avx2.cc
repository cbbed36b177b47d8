// AVX2 version of GdnHeadStep (kernels/gdn.h; GDN and KDA tokens), compiled with -mavx2 -mfma
// -ffp-contract=off. Per state row it makes two passes instead of four: (decay, then dot with k) and (rank-1
// update, then dot with q). Every value is the one of the portable code in gdn.cc: the decay is a plain
// multiply, the update a multiply then an add (no FMA, as in the portable loop), and both dots use DotF32's
// exact order (4 x 8 lanes over 32-element chunks, then 8-element chunks into the first accumulator, fixed
// lane reduction, then an fma tail).
#include <immintrin.h>

#include <cmath>
#include <cstdint>

namespace rw::kernels::gdn_avx2 {
namespace {

// The fixed lane order of DotF32 (kernels/dot.cc) in registers: s = (a0 + a1) + (a2 + a3) per lane, then
// lanes (0+4, 1+5, 2+6, 3+7), then (0+2, 1+3), then 0+1.
inline float ReduceLanes(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
  const __m256 s = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
  __m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
  h = _mm_add_ps(h, _mm_movehl_ps(h, h));
  h = _mm_add_ss(h, _mm_movehdup_ps(h));
  return _mm_cvtss_f32(h);
}

// kUpdate false: row = src * c (cv: src * cv, one factor per element), returns row · x.  kUpdate true:
// row = row + k * c, returns row · x (src unused).
template <bool kUpdate>
inline float UpdateThenDot(float* row, const float* k, float c, const float* x, int32_t n, const float* src = nullptr,
                           const float* cv = nullptr) {
  const __m256 vc = _mm256_set1_ps(c);
  if (src == nullptr) src = row;
  auto upd = [&](int64_t i) {
    const __m256 r = _mm256_loadu_ps((kUpdate ? row : src) + i);
    __m256 nr;
    if constexpr (kUpdate) {
      nr = _mm256_add_ps(r, _mm256_mul_ps(_mm256_loadu_ps(k + i), vc));
    } else {
      nr = _mm256_mul_ps(r, cv != nullptr ? _mm256_loadu_ps(cv + i) : vc);
    }
    _mm256_storeu_ps(row + i, nr);
    return nr;
  };
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 = _mm256_fmadd_ps(upd(i), _mm256_loadu_ps(x + i), a0);
    a1 = _mm256_fmadd_ps(upd(i + 8), _mm256_loadu_ps(x + i + 8), a1);
    a2 = _mm256_fmadd_ps(upd(i + 16), _mm256_loadu_ps(x + i + 16), a2);
    a3 = _mm256_fmadd_ps(upd(i + 24), _mm256_loadu_ps(x + i + 24), a3);
  }
  for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(upd(i), _mm256_loadu_ps(x + i), a0);
  float tail = 0.0f;
  for (; i < n; ++i) {
    if constexpr (kUpdate) {
      row[i] = row[i] + k[i] * c;
    } else {
      row[i] = src[i] * (cv != nullptr ? cv[i] : c);
    }
    tail = std::fma(row[i], x[i], tail);
  }
  return ReduceLanes(a0, a1, a2, a3) + tail;
}

inline void Update(float* row, const float* k, float c, int32_t n) {
  const __m256 vc = _mm256_set1_ps(c);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(row + i, _mm256_add_ps(_mm256_loadu_ps(row + i), _mm256_mul_ps(_mm256_loadu_ps(k + i), vc)));
  for (; i < n; ++i) row[i] = row[i] + k[i] * c;
}

}  // namespace

void HeadStep(float* M, const float* q, const float* k, const float* v, float beta, float decay, float scale,
              int32_t S, float* o, const float* M_in, int32_t rows, const float* decay_vec) {
  for (int32_t j = 0; j < rows; ++j) {
    float* row = M + static_cast<int64_t>(j) * S;
    const float kv = UpdateThenDot<false>(row, nullptr, decay, k, S, M_in + static_cast<int64_t>(j) * S, decay_vec);
    const float delta = (v[j] - kv) * beta;
    if (o != nullptr) {
      o[j] = UpdateThenDot<true>(row, k, delta, q, S) * scale;
    } else {
      Update(row, k, delta, S);
    }
  }
}

}  // namespace rw::kernels::gdn_avx2
