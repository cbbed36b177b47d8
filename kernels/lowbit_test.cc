// AVX2 kernels of the low-bit weight types (kernels/lowbit_avx2.h) against their scalar twin
// (gguf::DotLowbitRef): bit for bit for every type, size, row group, token count, thread split and with -128
// activations. (MatMul over batch sizes and threads: gemm_test.cc, which covers these types too.)
#include <gtest/gtest.h>

#include <cstring>
#include <iterator>
#include <random>
#include <thread>
#include <vector>

#include "base/cpu_features.h"
#include "base/cpu_features_testing.h"
#include "gguf/quant_grids.h"
#include "gguf/quants_lowbit.h"
#include "gguf/quants_lowbit_testing.h"
#include "kernels/dot.h"
#include "kernels/gemm.h"
#include "kernels/ref/vec_dot_ref.h"
#include "kernels/vec_dot.h"

namespace rw::kernels {
namespace {

using TT = gguf::TensorType;
using gguf::testing::kLowbitTypes;
using gguf::testing::RandomLowbitRow;

std::vector<uint8_t> Acts(TT weight_type, int64_t n, int64_t n_tok, std::mt19937& rng) {
  const TT at = gguf::VecDotType(weight_type);
  const size_t rb = gguf::RowBytes(at, n);
  std::vector<uint8_t> out(rb * n_tok);
  std::normal_distribution<float> dist(0.0f, 2.0f);
  std::vector<float> x(n);
  for (int64_t t = 0; t < n_tok; ++t) {
    for (auto& v : x) v = dist(rng);
    gguf::QuantizeActivationRow(at, x.data(), out.data() + t * rb, n);
  }
  return out;
}

std::vector<uint8_t> Weights(TT t, int64_t n, int64_t rows, std::mt19937& rng) {
  std::vector<uint8_t> w;
  for (int64_t r = 0; r < rows; ++r) {
    const auto row = RandomLowbitRow(t, n, rng);
    w.insert(w.end(), row.begin(), row.end());
  }
  return w;
}

bool SameBits(float a, float b) { return std::memcmp(&a, &b, 4) == 0; }

TEST(LowbitKernels, Avx2EqualsTheScalarTwinBitForBitForEveryTypeAndSize) {
  REWIND_SKIP_WITHOUT_AVX2();
  std::mt19937 rng(21);
  for (TT t : kLowbitTypes) {
    for (int64_t nb : {1, 2, 3, 8, 17}) {
      const int64_t n = nb * gguf::BlockSize(t);
      const auto w = RandomLowbitRow(t, n, rng);
      const auto a = Acts(t, n, 1, rng);
      float fast;
      VecDotRowsWith(VecDotImpl::kAvx2, t, n, w.data(), 0, 1, a.data(), &fast);
      const float twin = ref::VecDot(t, n, w.data(), a.data());
      ASSERT_TRUE(SameBits(fast, twin)) << gguf::TypeName(t) << " n=" << n << ": " << fast << " vs " << twin;
    }
  }
}

// Every element of a multi-row, multi-token call (1..40 tokens: more than one token group of the kernel) equals
// the single dot, for every row offset and with misaligned rows.
TEST(LowbitKernels, GemmAndRowGroupsGiveTheBitsOfTheSingleDot) {
  REWIND_SKIP_WITHOUT_AVX2();
  std::mt19937 rng(5);
  for (TT t : kLowbitTypes) {
    ASSERT_TRUE(GemmSupports(t)) << gguf::TypeName(t);
    const int64_t n = 2 * 256, R = 5, T = 40;
    const size_t wb = gguf::RowBytes(t, n), ab = gguf::RowBytes(gguf::VecDotType(t), n);
    auto w = Weights(t, n, R, rng);
    w.insert(w.begin(), 3, 0);  // rows start at odd addresses
    const uint8_t* w0 = w.data() + 3;
    const auto a = Acts(t, n, T, rng);
    std::vector<float> single(T * R);
    for (int64_t tok = 0; tok < T; ++tok)
      for (int64_t r = 0; r < R; ++r) single[tok * R + r] = ref::VecDot(t, n, w0 + r * wb, a.data() + tok * ab);
    for (int64_t nt : {1, 2, 3, 4, 5, 8, 31, 32, 33, 40}) {
      const int64_t t0 = rng() % (T - nt + 1), r0 = rng() % R, nr = 1 + rng() % (R - r0);
      std::vector<float> y(nt * R, -1.0f);
      GemmRows(t, n, w0 + r0 * wb, wb, nr, a.data() + t0 * ab, ab, nt, y.data() + r0, R);
      for (int64_t tok = 0; tok < nt; ++tok)
        for (int64_t r = r0; r < r0 + nr; ++r)
          ASSERT_TRUE(SameBits(y[tok * R + r], single[(t0 + tok) * R + r]))
              << gguf::TypeName(t) << " tokens " << nt << " tok " << tok << " row " << r;
    }
    std::vector<float> rows(R);
    VecDotRows(t, n, w0, wb, R, a.data(), rows.data());
    for (int64_t r = 0; r < R; ++r) ASSERT_TRUE(SameBits(rows[r], single[r])) << gguf::TypeName(t) << " row " << r;
  }
}

// -128 activations (a block whose largest |x| is tiny quantises to them; planted here directly): the sign trick
// cannot take them, so those tokens go through the twin; every token keeps the single dot's bits in any batch.
TEST(LowbitKernels, MinusOneTwentyEightActivationsKeepTheTwinsBits) {
  REWIND_SKIP_WITHOUT_AVX2();
  std::mt19937 rng(8);
  for (TT t : kLowbitTypes) {
    const int64_t n = 2 * 256, R = 3, T = 6;
    const TT at = gguf::VecDotType(t);
    const size_t wb = gguf::RowBytes(t, n), ab = gguf::RowBytes(at, n);
    const auto w = Weights(t, n, R, rng);
    auto a = Acts(t, n, T, rng);
    // Token 2: 40 activations of -128 (Q8_K: qs starts after the float d; Q8_0: after the f16 d of each block).
    const size_t qs0 = at == TT::kQ8_K ? 4 : 2;
    for (int k = 0; k < 40; ++k) a[2 * ab + qs0 + k] = 0x80;
    for (int64_t tok = 0; tok < T; ++tok) {
      std::vector<float> y(T * R);
      GemmRows(t, n, w.data(), wb, R, a.data(), ab, T, y.data(), R);
      for (int64_t r = 0; r < R; ++r) {
        const float twin = ref::VecDot(t, n, w.data() + r * wb, a.data() + tok * ab);
        float one;
        VecDotRowsWith(VecDotImpl::kAvx2, t, n, w.data() + r * wb, 0, 1, a.data() + tok * ab, &one);
        ASSERT_TRUE(SameBits(one, twin)) << gguf::TypeName(t) << " tok " << tok << " row " << r;
        ASSERT_TRUE(SameBits(y[tok * R + r], twin)) << gguf::TypeName(t) << " batch tok " << tok << " row " << r;
      }
    }
  }
}

// The 512-bit batch kernels (from 4 tokens on) and the decode-path kernels (1-3 tokens) against the plain AVX2
// batch kernels and the twin: 13 tokens cover the groups of 8, 4 and 1, with and without -128 activations.
TEST(LowbitKernels, Avx512BatchKernelsGiveThePlainAvx2Bits) {
  REWIND_SKIP_WITHOUT_AVX2();
  REWIND_SKIP_WITHOUT_AVX512();
  std::mt19937 rng(13);
  for (TT t : kLowbitTypes) {
    constexpr int64_t n = 3 * 256, R = 3, T = 13;
    const size_t wb = gguf::RowBytes(t, n), ab = gguf::RowBytes(gguf::VecDotType(t), n);
    const auto w = Weights(t, n, R, rng);
    auto a = Acts(t, n, T, rng);
    a[5 * ab + (gguf::VecDotType(t) == TT::kQ8_K ? 4 : 2)] = 0x80;  // token 5 holds a -128
    std::vector<float> wide(T * R), plain(T * R);
    GemmAllowAvx512(true);
    GemmRows(t, n, w.data(), wb, R, a.data(), ab, T, wide.data(), R);
    GemmAllowAvx512(false);
    GemmRows(t, n, w.data(), wb, R, a.data(), ab, T, plain.data(), R);
    GemmAllowAvx512(true);
    for (int64_t tok = 0; tok < T; ++tok)
      for (int64_t r = 0; r < R; ++r) {
        const float twin = ref::VecDot(t, n, w.data() + r * wb, a.data() + tok * ab);
        ASSERT_TRUE(SameBits(wide[tok * R + r], twin)) << gguf::TypeName(t) << " tok " << tok << " row " << r;
        ASSERT_TRUE(SameBits(plain[tok * R + r], twin)) << gguf::TypeName(t) << " tok " << tok << " row " << r;
      }
  }
}

// The 512-bit batch path (AVX-512 VNNI products for every type but IQ4_XS; Q4_K / Q5_K / Q6_K through
// GemmRowsKWide) against the plain AVX2 batch kernels and the AVX2 decode kernel, for token counts around its
// groups of 8 and 4, the plain path's 32-token chunks and the wide path's 128-token passes, 1-9 rows (groups of 4 and single rows), with a -128 activation, all-+127, all--127 and all--128
// tokens, and rows of the largest values the int16 packing takes (IQ3_XXS: the grid's largest 4-value sums;
// Q6_K: every value 63).
TEST(LowbitKernels, Avx512VnniBatchesGiveTheAvx2BitsForEveryTokenAndRowCount) {
  REWIND_SKIP_WITHOUT_AVX2();
  REWIND_SKIP_WITHOUT_AVX512();
  std::vector<TT> types(std::begin(kLowbitTypes), std::end(kLowbitTypes));
  types.insert(types.end(), {TT::kQ4_K, TT::kQ5_K, TT::kQ6_K});
  std::mt19937 rng(41);
  for (TT t : types) {
    constexpr int64_t n = 2 * 256, R = 9, T = 136;
    const TT at = gguf::VecDotType(t);
    const size_t wb = gguf::RowBytes(t, n), ab = gguf::RowBytes(at, n);
    std::vector<uint8_t> w;
    if (gguf::IsLowbitType(t)) {
      w = Weights(t, n, R, rng);
    } else {
      std::normal_distribution<float> dist(0.0f, 1.0f);
      std::vector<float> x(n * R);
      for (auto& v : x) v = dist(rng);
      w.resize(wb * R);
      for (int64_t r = 0; r < R; ++r) gguf::QuantizeRow(t, x.data() + r * n, w.data() + r * wb, n);
    }
    if (t == TT::kIQ3_XXS) {  // row 4: every group the grid entry of the largest sum, largest scale, no signs
      const auto sum4 = [](uint32_t g) { return (g & 255) + (g >> 8 & 255) + (g >> 16 & 255) + (g >> 24); };
      int top = 0;
      for (int k = 1; k < 256; ++k)
        if (sum4(gguf::grids::kIq3xxsGrid[k]) > sum4(gguf::grids::kIq3xxsGrid[top])) top = k;
      for (int64_t i = 0; i < n / 256; ++i) {
        auto* b = reinterpret_cast<gguf::BlockIQ3_XXS*>(w.data() + 4 * wb) + i;
        std::memset(b->qs, top, 64);
        for (int k = 0; k < 8; ++k) {
          const uint32_t aux = 0xF0000000u;
          std::memcpy(b->qs + 64 + 4 * k, &aux, 4);
        }
      }
    }
    if (t == TT::kQ6_K) {  // row 4: every value 63, scales +127 / -128
      for (int64_t i = 0; i < n / 256; ++i) {
        auto* b = reinterpret_cast<gguf::BlockQ6_K*>(w.data() + 4 * wb) + i;
        std::memset(b->ql, 0xFF, sizeof(b->ql));
        std::memset(b->qh, 0xFF, sizeof(b->qh));
        for (int k = 0; k < 16; ++k) b->scales[k] = static_cast<int8_t>(k % 2 ? -128 : 127);
      }
    }
    auto a = Acts(t, n, T, rng);
    const size_t qs0 = at == TT::kQ8_K ? 4 : 2;
    a[3 * ab + qs0 + 9] = 0x80;  // token 3 holds a -128
    if (at == TT::kQ8_K)  // token 30: every activation -128 (planted; bsums as they would be)
      for (int64_t i = 0; i < n / 256; ++i) {
        auto* y = reinterpret_cast<gguf::BlockQ8_K*>(a.data() + 30 * ab) + i;
        std::memset(y->qs, 0x80, sizeof(y->qs));
        for (int k = 0; k < 16; ++k) y->bsums[k] = -128 * 16;
      }
    for (int64_t tok : {10, 20}) {  // all +127 / all -127
      const std::vector<float> x(n, tok == 10 ? 1.0f : -1.0f);
      gguf::QuantizeActivationRow(at, x.data(), a.data() + tok * ab, n);
    }
    std::vector<float> decode(T * R);
    for (int64_t tok = 0; tok < T; ++tok)
      for (int64_t r = 0; r < R; ++r)
        VecDotRowsWith(VecDotImpl::kAvx2, t, n, w.data() + r * wb, 0, 1, a.data() + tok * ab, &decode[tok * R + r]);
    for (int64_t nt : {4, 5, 7, 8, 9, 12, 13, 16, 17, 24, 31, 32, 33, 40, 130, 136})
      for (int64_t nr : {1, 2, 3, 4, 5, 8, 9}) {
        std::vector<float> wide(nt * nr), plain(nt * nr);
        GemmRows(t, n, w.data(), wb, nr, a.data(), ab, nt, wide.data(), nr);
        GemmAllowAvx512(false);
        GemmRows(t, n, w.data(), wb, nr, a.data(), ab, nt, plain.data(), nr);
        GemmAllowAvx512(true);
        for (int64_t tok = 0; tok < nt; ++tok)
          for (int64_t r = 0; r < nr; ++r) {
            const float d = decode[tok * R + r];
            ASSERT_TRUE(SameBits(wide[tok * nr + r], d))
                << gguf::TypeName(t) << " tokens " << nt << " rows " << nr << " tok " << tok << " row " << r;
            ASSERT_TRUE(SameBits(plain[tok * nr + r], d))
                << gguf::TypeName(t) << " plain tokens " << nt << " rows " << nr << " tok " << tok << " row " << r;
          }
      }
  }
}

// The decode-path kernels (1-3 tokens; IQ2_XXS / IQ3_XXS look their grids up in registers, with 512-bit
// registers where the CPU has AVX-512) against the twin, with the 512-bit variants allowed and forbidden:
// 16 random rows (every sign pattern), a row of the largest grid values and scale, all-+127 / all--127 tokens
// and a token holding a -128.
TEST(LowbitKernels, DecodePathKernelsGiveTheTwinsBitsWithAndWithoutAvx512) {
  REWIND_SKIP_WITHOUT_AVX2();
  std::mt19937 rng(77);
  for (TT t : kLowbitTypes) {
    constexpr int64_t n = 3 * 256, R = 17, T = 5;
    const TT at = gguf::VecDotType(t);
    const size_t wb = gguf::RowBytes(t, n), ab = gguf::RowBytes(at, n);
    auto w = Weights(t, n, R, rng);
    for (int64_t i = 0; i < n / 256 && (t == TT::kIQ2_XXS || t == TT::kIQ3_XXS); ++i) {  // row 16: largest values
      uint8_t* qs = w.data() + 16 * wb + i * gguf::RowBytes(t, 256) + 2;  // after the f16 d
      const bool two = t == TT::kIQ2_XXS;
      int top = 0;  // the grid entry of the largest sum
      const auto sum = [&](int k) {
        const uint64_t g = two ? gguf::grids::kIq2xxsGrid[k] : gguf::grids::kIq3xxsGrid[k];
        int s = 0;
        for (int b = 0; b < (two ? 8 : 4); ++b) s += static_cast<int>(g >> (8 * b) & 255);
        return s;
      };
      for (int k = 1; k < 256; ++k)
        if (sum(k) > sum(top)) top = k;
      for (int ib = 0; ib < 8; ++ib) {
        const uint32_t aux = 0xF0000000u | static_cast<uint32_t>(ib * 0x1234567) % 0x10000000u;
        std::memset(qs + 8 * ib, top, two ? 4 : 8);
        std::memcpy(two ? qs + 8 * ib + 4 : qs + 64 + 4 * ib, &aux, 4);
      }
    }
    auto a = Acts(t, n, T, rng);
    for (int64_t tok : {0, 1}) {  // all +127 / all -127
      const std::vector<float> x(n, tok == 0 ? 1.0f : -1.0f);
      gguf::QuantizeActivationRow(at, x.data(), a.data() + tok * ab, n);
    }
    a[3 * ab + (at == TT::kQ8_K ? 4 : 2) + 37] = 0x80;  // token 3 holds a -128
    for (bool allow : {false, true}) {
      if (allow && !CpuHasAvx512()) continue;
      GemmAllowAvx512(allow);
      VecDotAllowAvx512(allow);
      for (int64_t t0 = 0; t0 < T; ++t0)
        for (int64_t nt = 1; nt <= 3 && t0 + nt <= T; ++nt) {
          std::vector<float> y(nt * R), one(R);
          GemmRows(t, n, w.data(), wb, R, a.data() + t0 * ab, ab, nt, y.data(), R);
          VecDotRows(t, n, w.data(), wb, R, a.data() + t0 * ab, one.data());
          for (int64_t r = 0; r < R; ++r) {
            ASSERT_TRUE(SameBits(one[r], ref::VecDot(t, n, w.data() + r * wb, a.data() + t0 * ab)))
                << gguf::TypeName(t) << " avx512 " << allow << " tok " << t0 << " row " << r;
            for (int64_t k = 0; k < nt; ++k)
              ASSERT_TRUE(SameBits(y[k * R + r], ref::VecDot(t, n, w.data() + r * wb, a.data() + (t0 + k) * ab)))
                  << gguf::TypeName(t) << " avx512 " << allow << " tokens " << nt << " tok " << t0 + k << " row " << r;
          }
        }
    }
    GemmAllowAvx512(true);
    VecDotAllowAvx512(true);
  }
}

// IQ1_S / IQ1_M rows at the edges of their fields (every scale 2 s + 1 = 15 with every delta -1 or +1, the
// largest grid indices, mixed) against tokens of random, all +127 and all -127 activations: the decode path
// (1-3 tokens) and a batch of 4 give the twin's bits, row by row.
void CheckIq1EdgeRows(bool allow_avx512) {
  GemmAllowAvx512(allow_avx512);
  VecDotAllowAvx512(allow_avx512);
  std::mt19937 rng(5);
  for (TT t : {TT::kIQ1_S, TT::kIQ1_M}) {
    constexpr int64_t n = 5 * 256, R = 7, T = 6;
    const size_t wb = gguf::RowBytes(t, n), bb = gguf::RowBytes(t, 256);
    auto w = Weights(t, n, R, rng);
    const bool s = t == TT::kIQ1_S;
    const size_t qh = s ? 34 : 32;  // offsets of qh and (IQ1_M) the scales in a block
    for (int64_t i = 0; i < n / 256; ++i) {
      uint8_t* b[4];
      for (int r = 0; r < 4; ++r) b[r] = w.data() + r * wb + i * bb;
      std::memset(b[0] + qh, 0xFF, 16);  // all high index bits; IQ1_S: s = 7, delta -1; IQ1_M: delta -1
      std::memset(b[1] + qh, s ? 0xFF : 0x77, 16);
      if (s)
        for (int k = 0; k < 8; ++k) b[1][qh + 2 * k + 1] = 0x7F;  // delta +1
      std::memset(b[2] + (s ? 2 : 0), 0xFF, 32);  // the largest grid indices
      for (int k = 0; k < 16; ++k) b[3][qh + k] = static_cast<uint8_t>(k % 3 == 0 ? 0x8F : 0xF8);
      if (!s)
        for (int r = 0; r < 4; ++r)
          for (int k = 0; k < 4; ++k) {  // s = 7 in every group, keeping the d nibbles
            uint16_t v;
            std::memcpy(&v, b[r] + 48 + 2 * k, 2);
            v |= 0x0FFF;
            std::memcpy(b[r] + 48 + 2 * k, &v, 2);
          }
    }
    const TT at = gguf::VecDotType(t);
    const size_t ab = gguf::RowBytes(at, n);
    auto a = Acts(t, n, T, rng);
    for (int64_t tok : {1, 4}) {
      const std::vector<float> x(n, tok == 1 ? 1.0f : -1.0f);
      gguf::QuantizeActivationRow(at, x.data(), a.data() + tok * ab, n);
    }
    for (int64_t nt = 1; nt <= 4; ++nt)
      for (int64_t t0 = 0; t0 + nt <= T; ++t0) {
        std::vector<float> y(nt * R);
        GemmRows(t, n, w.data(), wb, R, a.data() + t0 * ab, ab, nt, y.data(), R);
        for (int64_t k = 0; k < nt; ++k)
          for (int64_t r = 0; r < R; ++r)
            ASSERT_TRUE(SameBits(y[k * R + r], ref::VecDot(t, n, w.data() + r * wb, a.data() + (t0 + k) * ab)))
                << gguf::TypeName(t) << " avx512 " << allow_avx512 << " tokens " << nt << " tok " << t0 + k
                << " row " << r;
      }
  }
  GemmAllowAvx512(true);
  VecDotAllowAvx512(true);
}

TEST(LowbitKernels, Iq1Avx2DecodeKernelsGiveTheTwinsBitsAtTheEdgesOfTheirFields) {
  REWIND_SKIP_WITHOUT_AVX2();
  CheckIq1EdgeRows(false);
}

TEST(LowbitKernels, Iq1Avx512DecodeKernelsGiveTheTwinsBitsAtTheEdgesOfTheirFields) {
  REWIND_SKIP_WITHOUT_AVX512();
  if (!__builtin_cpu_supports("avx512vbmi") || !__builtin_cpu_supports("bmi2"))
    GTEST_SKIP() << "the 512-bit IQ1 decode path needs AVX-512 VBMI and BMI2, which this CPU lacks";
  CheckIq1EdgeRows(true);
}

TEST(LowbitKernels, ThreadsSplittingRowsGetTheSameBits) {
  std::mt19937 rng(99);
  for (TT t : {TT::kQ2_K, TT::kIQ2_XXS, TT::kIQ4_NL}) {
    const int64_t n = 2 * 256, rows = 17;
    const size_t rb = gguf::RowBytes(t, n);
    const auto w = Weights(t, n, rows, rng);
    const auto a = Acts(t, n, 1, rng);
    std::vector<float> one(rows), split(rows);
    VecDotRows(t, n, w.data(), rb, rows, a.data(), one.data());
    std::thread th([&] { VecDotRows(t, n, w.data(), rb, 6, a.data(), split.data()); });
    VecDotRows(t, n, w.data() + 6 * rb, rb, rows - 6, a.data(), split.data() + 6);
    th.join();
    EXPECT_EQ(std::memcmp(one.data(), split.data(), rows * 4), 0) << gguf::TypeName(t);
  }
}

}  // namespace
}  // namespace rw::kernels
