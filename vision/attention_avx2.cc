// The AVX2 twin of the vision attention tiles (vision/attention.h), compiled with -mavx2 -mfma
// -ffp-contract=off and called only after the CPU check. Scores: 4 queries x 24 keys (keys in lanes; 16 at
// the end of each 64-key tile); values: 4 queries x 24 head dims (dims in lanes), then 8 at a time; every
// lane one element's chain.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/exp_approx_avx2.h"
#include "vision/attention_tiles.h"

namespace rw::vision::attn {
namespace {

struct Ymm {
  using Reg = __m256;
  static constexpr int kLanes = 8;
  static Reg Zero() { return _mm256_setzero_ps(); }
  static Reg Set1(float x) { return _mm256_set1_ps(x); }
  static Reg Load(const float* p) { return _mm256_loadu_ps(p); }
  static void Store(float* p, Reg x) { _mm256_storeu_ps(p, x); }
  static Reg Mul(Reg a, Reg b) { return _mm256_mul_ps(a, b); }
  static Reg Fma(Reg a, Reg b, Reg c) { return _mm256_fmadd_ps(a, b, c); }
};

struct Avx2Kernels {
  static constexpr auto Scores = ScoresTiles<Ymm, 3>;
  static float ExpRow(float* s, int32_t n) { return ExpRowAvx2(s, n); }
  static constexpr auto Values = ValuesTiles<Ymm, 3>;
};

}  // namespace

float ExpRowAvx2(float* s, int32_t n) {
  const int32_t n8 = n & ~7;
  __m256 vm = _mm256_set1_ps(-INFINITY);
  for (int32_t j = 0; j < n8; j += 8) vm = _mm256_max_ps(vm, _mm256_loadu_ps(s + j));
  float lanes[8];
  _mm256_storeu_ps(lanes, vm);
  float m = -INFINITY;
  for (float x : lanes) m = std::max(m, x);
  for (int32_t j = n8; j < n; ++j) m = std::max(m, s[j]);
  const __m256 bm = _mm256_set1_ps(m);
  __m256 sum = _mm256_setzero_ps();
  for (int32_t j = 0; j < n8; j += 8) {
    const __m256 x = kernels::ExpApprox8(_mm256_sub_ps(_mm256_loadu_ps(s + j), bm));
    _mm256_storeu_ps(s + j, x);
    sum = _mm256_add_ps(sum, x);
  }
  for (int32_t j = n8; j < n; ++j) s[j] = kernels::ExpApprox(s[j] - m);
  _mm256_storeu_ps(lanes, sum);
  return LaneSum(lanes, s, n8, n);
}

void AttendBlockAvx2(const Block& b, const Scratch& sc) { AttendBlock<Avx2Kernels>(b, sc); }

}  // namespace rw::vision::attn
