// Internal to kernels/gemm_avx2.cc (included only there): tiles for the legacy 32-element formats Q4_0, Q5_0
// (against Q8_0) and Q4_1, Q5_1 (against Q8_1). Each element (r, t) runs the float operations of RowsQ4_0 /
// RowsQ5_0 / RowsQx_1 in kernels/vec_dot_avx2.cc: the same weight bytes (decoded once per block and row here,
// for all T tokens), the same sign trick and lane sums, one FMA per block with dw * da, the same Hsum, and for
// the _1 formats the scalar min term m * s accumulated in block order and added after the Hsum.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "gguf/quants.h"
#include "kernels/avx2_blocks.h"

namespace rw::kernels::gemm_avx2 {
namespace {

template <gguf::TensorType kType>
struct KLegacy {
  static constexpr bool kOne = kType == gguf::TensorType::kQ4_1 || kType == gguf::TensorType::kQ5_1;
  static constexpr bool kFive = kType == gguf::TensorType::kQ5_0 || kType == gguf::TensorType::kQ5_1;
  static constexpr int kR = 2, kT = 4;

  // Signed values (_0 formats) or unsigned (_1), the block's d and (for _1) m.
  static __m256i Decode(const uint8_t* w, int64_t i, uint16_t* d, uint16_t* m) {
    using namespace avx2_blocks;
    if constexpr (kType == gguf::TensorType::kQ4_0) {
      const auto* x = reinterpret_cast<const gguf::BlockQ4_0*>(w) + i;
      *d = x->d;
      return _mm256_sub_epi8(UnpackNibbles16(x->qs), _mm256_set1_epi8(8));
    } else if constexpr (kType == gguf::TensorType::kQ5_0) {
      const auto* x = reinterpret_cast<const gguf::BlockQ5_0*>(w) + i;
      *d = x->d;
      return _mm256_or_si256(UnpackNibbles16(x->qs),
                             _mm256_andnot_si256(BytesFromBits32(x->qh), _mm256_set1_epi8(static_cast<char>(0xF0))));
    } else if constexpr (kType == gguf::TensorType::kQ4_1) {
      const auto* x = reinterpret_cast<const gguf::BlockQ4_1*>(w) + i;
      *d = x->d;
      *m = x->m;
      return UnpackNibbles16(x->qs);
    } else {
      const auto* x = reinterpret_cast<const gguf::BlockQ5_1*>(w) + i;
      *d = x->d;
      *m = x->m;
      return _mm256_or_si256(UnpackNibbles16(x->qs), _mm256_and_si256(BytesFromBits32(x->qh), _mm256_set1_epi8(0x10)));
    }
  }

  template <int R, int T>
  static void Run(int64_t nb, const uint8_t* const* w, const uint8_t* const* act, float* out) {
    using namespace avx2_blocks;
    __m256 acc[R][T];
    float summ[R][T];
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) {
        acc[r][t] = _mm256_setzero_ps();
        summ[r][t] = 0.0f;
      }
    for (int64_t i = 0; i < nb; ++i) {
      float da[T], sa[T];
      const int8_t* qa[T];
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        if constexpr (kOne) {
          const auto* y = reinterpret_cast<const gguf::BlockQ8_1*>(act[t]) + i;
          da[t] = H2F(y->d);
          sa[t] = H2F(y->s);
          qa[t] = y->qs;
        } else {
          const auto* y = reinterpret_cast<const gguf::BlockQ8_0*>(act[t]) + i;
          da[t] = H2F(y->d);
          qa[t] = y->qs;
        }
      }
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        uint16_t dw, mw = 0;
        const __m256i q = Decode(w[r], i, &dw, &mw);
        const __m256i aq = kOne ? q : _mm256_sign_epi8(q, q);
        const float dwf = H2F(dw);
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          const __m256i a = Load256(qa[t]);
          const __m256i s = DotUnsigned(aq, kOne ? a : _mm256_sign_epi8(a, q));
          acc[r][t] = _mm256_fmadd_ps(_mm256_set1_ps(dwf * da[t]), _mm256_cvtepi32_ps(s), acc[r][t]);
          if constexpr (kOne) summ[r][t] += H2F(mw) * sa[t];
        }
      }
    }
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) out[r * T + t] = kOne ? Hsum(acc[r][t]) + summ[r][t] : Hsum(acc[r][t]);
  }
};

}  // namespace
}  // namespace rw::kernels::gemm_avx2
