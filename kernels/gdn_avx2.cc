// AVX2 version of GdnHeadStep (kernels/gdn.h), compiled with -mavx2 -mfma -ffp-contract=off. Per state row it
// makes two passes instead of four: (decay, then dot with k) and (rank-1 update, then dot with q). Every value
// is the one of the portable code in gdn.cc: the decay is a plain multiply, the update a multiply then an add
// (no FMA, as in the portable loop), and both dots use DotF32's exact order (4 x 8 lanes over 32-element
// chunks, then 8-element chunks into the first accumulator, fixed lane reduction, then an fma tail).
#include <immintrin.h>

#include <cmath>
#include <cstdint>

namespace rw::kernels::gdn_avx2 {
namespace {

inline float ReduceLanes(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
  alignas(32) float acc[4][8];
  _mm256_store_ps(acc[0], a0);
  _mm256_store_ps(acc[1], a1);
  _mm256_store_ps(acc[2], a2);
  _mm256_store_ps(acc[3], a3);
  float s[8];
  for (int l = 0; l < 8; ++l) s[l] = (acc[0][l] + acc[1][l]) + (acc[2][l] + acc[3][l]);
  float h[4];
  for (int l = 0; l < 4; ++l) h[l] = s[l] + s[l + 4];
  const float h0 = h[0] + h[2], h1 = h[1] + h[3];
  return h0 + h1;
}

// kUpdate false: row = row * c, returns row · x.  kUpdate true: row = row + k * c, returns row · x.
template <bool kUpdate>
inline float UpdateThenDot(float* row, const float* k, float c, const float* x, int32_t n) {
  const __m256 vc = _mm256_set1_ps(c);
  auto upd = [&](int64_t i) {
    const __m256 r = _mm256_loadu_ps(row + i);
    __m256 nr;
    if constexpr (kUpdate) {
      nr = _mm256_add_ps(r, _mm256_mul_ps(_mm256_loadu_ps(k + i), vc));
    } else {
      nr = _mm256_mul_ps(r, vc);
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
      row[i] = row[i] * c;
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
              int32_t S, float* o) {
  for (int32_t j = 0; j < S; ++j) {
    float* row = M + static_cast<int64_t>(j) * S;
    const float kv = UpdateThenDot<false>(row, nullptr, decay, k, S);
    const float delta = (v[j] - kv) * beta;
    if (o != nullptr) {
      o[j] = UpdateThenDot<true>(row, k, delta, q, S) * scale;
    } else {
      Update(row, k, delta, S);
    }
  }
}

}  // namespace rw::kernels::gdn_avx2
