// kernels/gemm.h: every element of a tiled multi-token call is bit-identical to the single-row, single-token
// VecDot, for every tile shape, remainder, row offset and token count 1..64.
#include "kernels/gemm.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <iterator>
#include <random>
#include <vector>

#include "base/cpu_features_testing.h"
#include "gguf/quants.h"
#include "gguf/quants_lowbit_testing.h"
#include "kernels/matmul.h"
#include "kernels/thread_pool.h"
#include "kernels/vec_dot.h"

namespace rw::kernels {
namespace {

using TT = gguf::TensorType;

std::vector<uint8_t> Rows(TT t, int64_t rows, int64_t n, std::mt19937& rng, float scale, bool activation) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> x(n);
  const uint64_t rb = gguf::RowBytes(t, n);
  std::vector<uint8_t> out(rb * rows);
  for (int64_t r = 0; r < rows; ++r) {
    for (auto& v : x) v = dist(rng);
    if (!activation && gguf::IsLowbitType(t)) {  // no quantiser: random blocks
      const auto row = gguf::testing::RandomLowbitRow(t, n, rng);
      std::memcpy(out.data() + r * rb, row.data(), rb);
    } else if (activation) {
      gguf::QuantizeActivationRow(t, x.data(), out.data() + r * rb, n);
    } else {
      gguf::QuantizeRow(t, x.data(), out.data() + r * rb, n);
    }
  }
  return out;
}

void TiledCallsMatchSingleVecDot() {
  for (TT t : {TT::kQ8_0, TT::kQ4_0, TT::kQ4_1, TT::kQ5_0, TT::kQ5_1, TT::kQ4_K, TT::kQ5_K, TT::kQ6_K, TT::kF32,
               TT::kF16, TT::kBF16}) {
    if (!GemmSupports(t)) GTEST_SKIP() << "no tiled kernels for this type: " << CpuAvx2OffReason();
    std::mt19937 rng(static_cast<uint32_t>(t) + 7);
    const int64_t n = (t == TT::kF32 || t == TT::kF16 || t == TT::kBF16) ? 264 : 512;  // F: tail of 0 (8 | 264)
    const int64_t R = 11, T = 64;
    const TT at = gguf::VecDotType(t);
    const auto w = Rows(t, R, n, rng, 1.0f, false);
    const auto a = Rows(at, T, n, rng, 2.0f, true);
    const uint64_t wb = gguf::RowBytes(t, n), ab = gguf::RowBytes(at, n);
    std::vector<float> single(T * R);
    for (int64_t tok = 0; tok < T; ++tok)
      for (int64_t r = 0; r < R; ++r) single[tok * R + r] = VecDot(t, n, w.data() + r * wb, a.data() + tok * ab);
    // Every token count 1..T starting at a random token, every row range starting at every offset.
    for (int64_t nt = 1; nt <= T; ++nt) {
      const int64_t t0 = rng() % (T - nt + 1);
      const int64_t r0 = rng() % R, nr = 1 + rng() % (R - r0);
      std::vector<float> y(nt * R, -1.0f);
      GemmRows(t, n, w.data() + r0 * wb, wb, nr, a.data() + t0 * ab, ab, nt, y.data() + r0, R);
      for (int64_t tok = 0; tok < nt; ++tok)
        for (int64_t r = r0; r < r0 + nr; ++r)
          ASSERT_EQ(std::memcmp(&y[tok * R + r], &single[(t0 + tok) * R + r], 4), 0)
              << gguf::TypeName(t) << " tokens " << nt << " tok " << tok << " row " << r;
    }
  }
}

// The plain AVX2 kernels while it lives, on a CPU whose default kernels are the AVX-512 variants.
struct PlainAvx2Kernels {
  PlainAvx2Kernels() {
    GemmAllowAvx512(false);
    VecDotAllowAvx512(false);
  }
  ~PlainAvx2Kernels() {
    GemmAllowAvx512(true);
    VecDotAllowAvx512(true);
  }
};

// The kernels GemmRows picks on this CPU (kernels/gemm.h).
TEST(Gemm, TiledCallsMatchSingleVecDotBitForBitForAnyShape) { TiledCallsMatchSingleVecDot(); }

// On an AVX-512 CPU, the plain AVX2 kernels too (elsewhere the test above ran them).
TEST(Gemm, PlainAvx2TiledCallsOnAnAvx512CpuMatchSingleVecDot) {
  REWIND_SKIP_WITHOUT_AVX512();
  PlainAvx2Kernels plain;
  TiledCallsMatchSingleVecDot();
}

TEST(Gemm, FloatTailElementsMatchSingleVecDot) {
  for (TT t : {TT::kF32, TT::kF16}) {
    if (!GemmSupports(t)) GTEST_SKIP() << "no tiled kernels for this type: " << CpuAvx2OffReason();
    std::mt19937 rng(99);
    const int64_t n = 77, R = 5, T = 19;  // full 8-token tiles (F16 AVX-512 variant) and odd remainders
    const auto w = Rows(t, R, n, rng, 1.0f, false);
    const auto a = Rows(t, T, n, rng, 1.0f, true);
    const uint64_t rb = gguf::RowBytes(t, n);
    std::vector<float> y(T * R);
    GemmRows(t, n, w.data(), rb, R, a.data(), rb, T, y.data(), R);
    for (int64_t tok = 0; tok < T; ++tok)
      for (int64_t r = 0; r < R; ++r) {
        const float s = VecDot(t, n, w.data() + r * rb, a.data() + tok * rb);
        ASSERT_EQ(std::memcmp(&y[tok * R + r], &s, 4), 0) << gguf::TypeName(t);
      }
  }
}

// F16 on AVX-512 (activations converted to F32 per block of 48 tokens, tiles of 6 rows x 8 tokens): every row
// count 1..13 and token counts across the tile, remainder and block boundaries, with a 5-element scalar tail,
// against the plain AVX2 kernels and the decode kernel.
TEST(Gemm, F16Avx512TilesMatchPlainAvx2AndVecDotForEveryRowAndTokenCount) {
  REWIND_SKIP_WITHOUT_AVX512();
  std::mt19937 rng(61);
  const int64_t n = 261, R = 13, T = 100;
  const auto w = Rows(TT::kF16, R, n, rng, 1.0f, false);
  const auto a = Rows(TT::kF16, T, n, rng, 1.0f, true);
  const uint64_t rb = gguf::RowBytes(TT::kF16, n);
  std::vector<float> single(T * R);
  for (int64_t tok = 0; tok < T; ++tok)
    for (int64_t r = 0; r < R; ++r) single[tok * R + r] = VecDot(TT::kF16, n, w.data() + r * rb, a.data() + tok * rb);
  for (int64_t nt : {1, 2, 3, 5, 7, 8, 9, 13, 16, 17, 47, 48, 49, 100})
    for (int64_t nr = 1; nr <= R; ++nr) {
      const int64_t t0 = rng() % (T - nt + 1);
      std::vector<float> y(nt * nr), plain(nt * nr);
      GemmRows(TT::kF16, n, w.data(), rb, nr, a.data() + t0 * rb, rb, nt, y.data(), nr);
      {
        PlainAvx2Kernels scope;
        GemmRows(TT::kF16, n, w.data(), rb, nr, a.data() + t0 * rb, rb, nt, plain.data(), nr);
      }
      for (int64_t tok = 0; tok < nt; ++tok)
        for (int64_t r = 0; r < nr; ++r) {
          ASSERT_EQ(std::memcmp(&y[tok * nr + r], &single[(t0 + tok) * R + r], 4), 0)
              << "tokens " << nt << " rows " << nr << " tok " << tok << " row " << r;
          ASSERT_EQ(std::memcmp(&plain[tok * nr + r], &single[(t0 + tok) * R + r], 4), 0)
              << "plain: tokens " << nt << " rows " << nr << " tok " << tok << " row " << r;
        }
    }
}

TEST(Gemm, Q8_0ActivationsOfMinus128KeepTheBitsOfVecDot) {
  if (!GemmSupports(TT::kQ8_0)) GTEST_SKIP() << "no tiled kernels for this type: " << CpuAvx2OffReason();
  std::mt19937 rng(5);
  const int64_t n = 256, R = 9, T = 17;
  const auto w = Rows(TT::kQ8_0, R, n, rng, 1.0f, false);
  auto a = Rows(TT::kQ8_0, T, n, rng, 1.0f, true);
  // Tiny blocks quantise to -128 (127 / amax overflows); also plant -128 directly.
  std::vector<float> tiny(n);
  for (int64_t k = 0; k < n; ++k) tiny[k] = (k % 3 == 0 ? -1.0f : 0.5f) * 1e-38f;
  const uint64_t rb = gguf::RowBytes(TT::kQ8_0, n);
  gguf::QuantizeActivationRow(TT::kQ8_0, tiny.data(), a.data() + 3 * rb, n);
  a[5 * rb + 7] = 0x80;
  std::vector<float> y(T * R);
  GemmRows(TT::kQ8_0, n, w.data(), rb, R, a.data(), rb, T, y.data(), R);
  for (int64_t tok = 0; tok < T; ++tok)
    for (int64_t r = 0; r < R; ++r) {
      const float s = VecDot(TT::kQ8_0, n, w.data() + r * rb, a.data() + tok * rb);
      ASSERT_EQ(std::memcmp(&y[tok * R + r], &s, 4), 0) << "tok " << tok << " row " << r;
    }
}

// Batches of 2-8 tokens (speculative verification) take their own Q8_0, Q4_K, Q5_K and Q6_K paths on AVX-512 VNNI
// CPUs (register pairs of rows in groups, then pairs, then a last odd row): every row count and offset, and with
// extreme activations (Q8_0: a -128, which sends the batch to the plain tiles; K quants: a chunk of -128 against
// every weight value), must give VecDot's bits.
void FewTokenBatchesMatchSingleVecDot(TT type, bool extreme) {
  std::mt19937 rng(17);
  const TT at = gguf::VecDotType(type);
  const int64_t n = type == TT::kQ8_0 ? 320 : 512, R = 27, T = 9;
  const auto w = Rows(type, R, n, rng, 1.0f, false);
  auto a = Rows(at, T, n, rng, 2.0f, true);
  const uint64_t rb = gguf::RowBytes(type, n), ab = gguf::RowBytes(at, n);
  if (extreme && type == TT::kQ8_0) {
    a[1 * ab + 40] = 0x80;
  } else if (extreme) {
    // Token 1, block 1: 64 activations (weights 128..191) all -128.
    const size_t qs = 1 * ab + gguf::RowBytes(at, 256) + offsetof(gguf::BlockQ8_K, qs) + 2 * 64;
    std::memset(&a[qs], 0x80, 64);
  }
  std::vector<float> single(T * R);
  for (int64_t tok = 0; tok < T; ++tok)
    for (int64_t r = 0; r < R; ++r) single[tok * R + r] = VecDot(type, n, w.data() + r * rb, a.data() + tok * ab);
  for (int64_t nt = 2; nt <= T; ++nt)
    for (int64_t r0 = 0; r0 < 3; ++r0)
      for (int64_t nr = 1; r0 + nr <= R; ++nr) {
        std::vector<float> y(nt * R, -1.0f);
        GemmRows(type, n, w.data() + r0 * rb, rb, nr, a.data(), ab, nt, y.data() + r0, R);
        for (int64_t tok = 0; tok < nt; ++tok)
          for (int64_t r = r0; r < r0 + nr; ++r)
            ASSERT_EQ(std::memcmp(&y[tok * R + r], &single[tok * R + r], 4), 0)
                << gguf::TypeName(type) << (extreme ? " extreme activations" : "") << ": tokens " << nt << " rows "
                << r0 << "+" << nr << " tok " << tok << " row " << r;
      }
}

TEST(Gemm, FewTokenBatchesMatchSingleVecDotForEveryRowCount) {
  for (TT type : {TT::kQ8_0, TT::kQ4_K, TT::kQ5_K, TT::kQ6_K}) {
    if (!GemmSupports(type)) GTEST_SKIP() << "no tiled kernels for this type: " << CpuAvx2OffReason();
    for (bool extreme : {false, true}) FewTokenBatchesMatchSingleVecDot(type, extreme);
  }
}

// On an AVX-512 CPU, the plain AVX2 kernels too (elsewhere the test above ran them).
TEST(Gemm, PlainAvx2FewTokenBatchesOnAnAvx512CpuMatchSingleVecDot) {
  REWIND_SKIP_WITHOUT_AVX512();
  PlainAvx2Kernels plain;
  for (TT type : {TT::kQ8_0, TT::kQ4_K, TT::kQ5_K, TT::kQ6_K}) FewTokenBatchesMatchSingleVecDot(type, false);
}

// VecDotRows runs groups of rows through the AVX-512 VNNI kernel when the CPU has it (Q8_0), single rows
// through the AVX2 one: every row must get VecDot's bits, -128 included.
void VecDotRowGroupsMatchSingleRows() {
  std::mt19937 rng(17);
  const int64_t n = 1024, R = 11, T = 4;
  const auto w = Rows(TT::kQ8_0, R, n, rng, 1.0f, false);
  auto a = Rows(TT::kQ8_0, T, n, rng, 1.0f, true);
  const uint64_t rb = gguf::RowBytes(TT::kQ8_0, n);
  a[2 * rb + 40] = 0x80;  // token 2: one activation of -128 (those calls keep the AVX2 kernel)
  for (int64_t tok = 0; tok < T; ++tok)
    for (int64_t r0 = 0; r0 < R; ++r0) {
      std::vector<float> y(R - r0);
      VecDotRows(TT::kQ8_0, n, w.data() + r0 * rb, rb, R - r0, a.data() + tok * rb, y.data());
      for (int64_t r = r0; r < R; ++r) {
        const float s = VecDot(TT::kQ8_0, n, w.data() + r * rb, a.data() + tok * rb);
        ASSERT_EQ(std::memcmp(&y[r - r0], &s, 4), 0) << "tok " << tok << " row " << r;
      }
    }
}

TEST(Gemm, VecDotRowGroupsMatchSingleRowsBitForBit) {
  REWIND_SKIP_WITHOUT_AVX2();
  VecDotRowGroupsMatchSingleRows();
}

// On an AVX-512 CPU, the plain AVX2 kernel too (elsewhere the test above ran it).
TEST(Gemm, PlainAvx2VecDotRowGroupsOnAnAvx512CpuMatchSingleRows) {
  REWIND_SKIP_WITHOUT_AVX512();
  PlainAvx2Kernels plain;
  VecDotRowGroupsMatchSingleRows();
}

// Decode's K-quant rows (one row at a time, VecDotRows) run 512-bit kernels on AVX-512 VNNI CPUs: the bits of
// the plain AVX2 kernels for random blocks (every nibble, high bit and 6-bit scale), with activations that
// include a block of -128.
TEST(Gemm, Avx512KQuantRowsGiveThePlainAvx2Bits) {
  REWIND_SKIP_WITHOUT_AVX512();
  std::mt19937 rng(23);
  const int64_t n = 1024, R = 9;
  for (TT type : {TT::kQ4_K, TT::kQ5_K, TT::kQ6_K}) {
    const uint64_t rb = gguf::RowBytes(type, n), ab = gguf::RowBytes(TT::kQ8_K, n), bb = rb / (n / 256);
    std::vector<uint8_t> w(rb * R);
    for (auto& b : w) b = static_cast<uint8_t>(rng());
    for (int64_t blk = 0; blk < R * (n / 256); ++blk) {  // finite f16 scales: d (and dmin) in [2^-10, 2^-9)
      uint8_t* b = w.data() + blk * bb;
      const size_t d_at = type == TT::kQ6_K ? offsetof(gguf::BlockQ6_K, d) : 0;
      for (size_t k = 0; k < (type == TT::kQ6_K ? 1u : 2u); ++k) {
        const uint16_t h = static_cast<uint16_t>(0x1800 | (rng() & 0x3FF));
        std::memcpy(b + d_at + 2 * k, &h, 2);
      }
    }
    auto a = Rows(TT::kQ8_K, 2, n, rng, 2.0f, true);
    std::memset(&a[ab + gguf::RowBytes(TT::kQ8_K, 256) + offsetof(gguf::BlockQ8_K, qs)], 0x80, 256);
    for (int64_t tok = 0; tok < 2; ++tok) {
      std::vector<float> wide(R), plain(R);
      VecDotRows(type, n, w.data(), rb, R, a.data() + tok * ab, wide.data());
      {
        PlainAvx2Kernels p;
        VecDotRows(type, n, w.data(), rb, R, a.data() + tok * ab, plain.data());
      }
      for (int64_t r = 0; r < R; ++r)
        ASSERT_EQ(std::memcmp(&wide[r], &plain[r], 4), 0)
            << gguf::TypeName(type) << " tok " << tok << " row " << r << ": " << wide[r] << " vs " << plain[r];
    }
  }
}

TEST(Gemm, MatMulGivesTheSameBitsForEveryBatchSizeAndThreadCount) {
  const int64_t K = 512, R = 23, T = 64;
  std::vector<TT> types = {TT::kQ8_0, TT::kQ4_0, TT::kQ4_1, TT::kQ5_0, TT::kQ5_1, TT::kQ4_K, TT::kQ5_K, TT::kQ6_K,
                           TT::kF16, TT::kBF16};
  types.insert(types.end(), std::begin(gguf::testing::kLowbitTypes), std::end(gguf::testing::kLowbitTypes));
  for (TT t : types) {
    std::mt19937 rng(static_cast<uint32_t>(t) + 100);
    const auto w = Rows(t, R, K, rng, 1.0f, false);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<float> x(T * K);
    for (auto& v : x) v = dist(rng);
    const Matrix m{t, w.data(), K, R, gguf::RowBytes(t, K)};
    std::vector<float> single(T * R);
    for (int64_t tok = 0; tok < T; ++tok) MatMul(m, x.data() + tok * K, 1, single.data() + tok * R, nullptr);
    ThreadPool pools[3] = {ThreadPool(1), ThreadPool(2), ThreadPool(3)};
    for (int64_t bs = 1; bs <= T; ++bs) {
      const int64_t t0 = rng() % (T - bs + 1);
      std::vector<float> y(bs * R);
      MatMul(m, x.data() + t0 * K, bs, y.data(), &pools[bs % 3]);
      ASSERT_EQ(std::memcmp(y.data(), single.data() + t0 * R, y.size() * 4), 0)
          << gguf::TypeName(t) << " batch " << bs << " threads " << bs % 3 + 1;
    }
  }
}

}  // namespace
}  // namespace rw::kernels
