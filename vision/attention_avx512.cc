// The AVX-512 twin of the vision attention tiles (vision/attention.h), compiled with -mavx512f -mavx512dq
// -mavx2 -mfma -ffp-contract=off and called only after the CPU check. Scores: 4 queries x 64 keys (keys in
// lanes, 16 accumulators); values: 4 queries x 80 head dims (dims in lanes; the packed rows are padded to 16,
// so D = 72 is one chunk of 5 vectors), 20 accumulators. The softmax row is the AVX2 one (the same operations
// per lane).
#include <immintrin.h>

#include <cstdint>

#include "vision/attention_tiles.h"

namespace rw::vision::attn {
namespace {

struct Zmm {
  using Reg = __m512;
  static constexpr int kLanes = 16;
  static Reg Zero() { return _mm512_setzero_ps(); }
  static Reg Set1(float x) { return _mm512_set1_ps(x); }
  static Reg Load(const float* p) { return _mm512_loadu_ps(p); }
  static void Store(float* p, Reg x) { _mm512_storeu_ps(p, x); }
  static Reg Mul(Reg a, Reg b) { return _mm512_mul_ps(a, b); }
  static Reg Fma(Reg a, Reg b, Reg c) { return _mm512_fmadd_ps(a, b, c); }
};

struct Avx512Kernels {
  static constexpr auto Scores = ScoresTiles<Zmm, 4>;
  static float ExpRow(float* s, int32_t n) { return ExpRowAvx2(s, n); }
  static constexpr auto Values = ValuesTiles<Zmm, 5>;
};

}  // namespace

void AttendBlockAvx512(const Block& b, const Scratch& sc) { AttendBlock<Avx512Kernels>(b, sc); }

}  // namespace rw::vision::attn
