// KV cache element types (kernels/kv_quant.h): names, sizes, llama.cpp's reference quantisers byte for byte,
// the AVX2 dequantisation against its scalar twin, and rows that depend on themselves only (I1).
#include "kernels/kv_quant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "base/cpu_features_testing.h"
#include "base/file.h"

namespace rw::kernels {
namespace {

std::vector<float> RandomRow(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(rng);
  return v;
}

TEST(KvQuant, ParsesLlamaServerNamesAndRejectsOthersListingTheChoices) {
  for (KvType t : kAllKvTypes) {
    auto p = ParseKvType(KvTypeName(t));
    ASSERT_TRUE(p.ok()) << KvTypeName(t);
    EXPECT_EQ(*p, t);
  }
  EXPECT_EQ(*ParseKvType("Q8_0"), KvType::kQ8_0);
  EXPECT_EQ(*ParseKvType("IQ4_NL"), KvType::kIQ4_NL);
  auto bad = ParseKvType("q4_k");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("f32, f16, bf16, q8_0, q5_1, q5_0, q4_1, q4_0, iq4_nl"),
            std::string::npos)
      << bad.error().message;
  EXPECT_EQ(KvTypesName({KvType::kQ8_0, KvType::kF16}), "q8_0/f16");
  EXPECT_EQ(KvTypesName(KvType::kQ4_0), "q4_0");
}

TEST(KvQuant, RowBytesAreTheGgufBlockSizes) {
  const std::pair<KvType, size_t> bytes_per_256[] = {
      {KvType::kF32, 1024}, {KvType::kF16, 512},  {KvType::kBF16, 512},
      {KvType::kQ8_0, 272}, {KvType::kQ5_1, 192}, {KvType::kQ5_0, 176},
      {KvType::kQ4_1, 160}, {KvType::kQ4_0, 144}, {KvType::kIQ4_NL, 144}};
  for (auto [t, b] : bytes_per_256) {
    EXPECT_EQ(KvRowBytes(t, 256), b) << KvTypeName(t);
    EXPECT_DOUBLE_EQ(KvBytesPerElement(t), b / 256.0) << KvTypeName(t);
  }
  EXPECT_EQ(KvBlockElems(KvType::kF16), 1);
  EXPECT_EQ(KvBlockElems(KvType::kIQ4_NL), 32);
}

// tests/data/kv_quant/llama_kv_rows.bin: rows (random and edge cases) encoded by llama.cpp v0.5.0's
// quantize_row_*_ref (see the README there).
TEST(KvQuant, QuantisersReproduceLlamaCppReferenceBytes) {
  auto file = ReadFileToString(std::string(REWIND_TEST_DATA) + "/kv_quant/llama_kv_rows.bin");
  ASSERT_TRUE(file.ok()) << file.error().ToString();
  const std::string& b = *file;
  size_t at = 0;
  auto u32 = [&] {
    uint32_t v;
    std::memcpy(&v, b.data() + at, 4);
    at += 4;
    return v;
  };
  const uint32_t rows = u32(), cols = u32();
  std::vector<float> x(static_cast<size_t>(rows) * cols);
  std::memcpy(x.data(), b.data() + at, x.size() * 4);
  at += x.size() * 4;
  const std::pair<uint32_t, KvType> ids[] = {{1, KvType::kF16},  {30, KvType::kBF16},  {8, KvType::kQ8_0},
                                             {7, KvType::kQ5_1}, {6, KvType::kQ5_0},   {3, KvType::kQ4_1},
                                             {2, KvType::kQ4_0}, {20, KvType::kIQ4_NL}};
  int checked = 0;
  while (at < b.size()) {
    const uint32_t id = u32(), rb = u32();
    KvType t = KvType::kF32;
    bool known = false;
    for (auto [i, k] : ids) {
      if (i == id) t = k, known = true;
    }
    ASSERT_TRUE(known) << "type id " << id;
    ASSERT_EQ(KvRowBytes(t, cols), rb) << KvTypeName(t);
    std::vector<uint8_t> mine(rb);
    for (uint32_t r = 0; r < rows; ++r) {
      const float* src = x.data() + static_cast<size_t>(r) * cols;
      QuantizeKvRow(t, src, mine.data(), cols);
      const uint8_t* want = reinterpret_cast<const uint8_t*>(b.data() + at + static_cast<size_t>(r) * rb);
      if (t != KvType::kIQ4_NL) {
        EXPECT_EQ(std::memcmp(mine.data(), want, rb), 0) << KvTypeName(t) << " row " << r;
        continue;
      }
      // IQ4_NL: llama.cpp leaves the indices of an all-(near-)zero block unset (stack contents), its scale 0;
      // such blocks are compared by scale only.
      for (uint32_t blk = 0; blk < cols / 32; ++blk) {
        float amax = 0;
        for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(src[blk * 32 + j]));
        const size_t n = amax < 1e-15f ? 2 : 18;
        EXPECT_EQ(std::memcmp(mine.data() + blk * 18, want + blk * 18, n), 0)
            << "iq4_nl row " << r << " block " << blk;
      }
    }
    at += static_cast<size_t>(rows) * rb;
    ++checked;
  }
  EXPECT_EQ(checked, 8);
}

TEST(KvQuant, FastDequantisationGivesTheScalarTwinsBits) {
  REWIND_SKIP_WITHOUT_AVX2();
  for (KvType t : kAllKvTypes) {
    const int64_t blk = KvBlockElems(t) == 1 ? 8 : 32;
    for (int64_t n = 0; n <= 2 * 8 * blk; n += KvBlockElems(t) == 1 ? 1 : 32) {
      for (size_t mis : {0, 1, 3}) {  // pointers need no alignment
        auto x = RandomRow(n, static_cast<uint32_t>(n) * 7 + static_cast<uint32_t>(t), 3.0f);
        std::vector<uint8_t> q(KvRowBytes(t, n) + mis);
        QuantizeKvRow(t, x.data(), q.data() + mis, n);
        std::vector<float> fast(static_cast<size_t>(n) + 1, -7.0f), twin(static_cast<size_t>(n) + 1, -7.0f);
        DequantizeKvRow(t, q.data() + mis, fast.data(), n);
        ref::DequantizeKvRow(t, q.data() + mis, twin.data(), n);
        ASSERT_EQ(std::memcmp(fast.data(), twin.data(), fast.size() * sizeof(float)), 0)
            << KvTypeName(t) << " n " << n << " misaligned " << mis;
      }
    }
  }
}

TEST(KvQuant, ARowIsAFunctionOfItsOwnBlocksOnly) {
  // A K/V row of Hkv heads quantised at once equals its heads (and its 32-element blocks) quantised apart:
  // the bytes of a position never depend on how rows were batched or on their neighbours.
  const int64_t D = 64, W = 4 * D;
  auto x = RandomRow(W, 5, 2.0f);
  for (KvType t : kAllKvTypes) {
    std::vector<uint8_t> whole(KvRowBytes(t, W)), parts(KvRowBytes(t, W));
    QuantizeKvRow(t, x.data(), whole.data(), W);
    for (int64_t c = 0; c < W; c += 32) QuantizeKvRow(t, x.data() + c, parts.data() + KvRowBytes(t, c), 32);
    EXPECT_EQ(whole, parts) << KvTypeName(t);
  }
}

TEST(KvQuant, RoundTripErrorIsWithinEachTypesStep) {
  const int64_t n = 1024;
  auto x = RandomRow(n, 9, 1.5f);
  // Worst |error| relative to the block's largest magnitude.
  const std::pair<KvType, double> bound[] = {
      {KvType::kF32, 0},          {KvType::kF16, 1e-3},      {KvType::kBF16, 8e-3},
      {KvType::kQ8_0, 1.0 / 127}, {KvType::kQ5_1, 1.0 / 31}, {KvType::kQ5_0, 0.07},
      {KvType::kQ4_1, 1.0 / 15},  {KvType::kQ4_0, 0.13},     {KvType::kIQ4_NL, 0.2}};
  for (auto [t, rel] : bound) {
    std::vector<uint8_t> q(KvRowBytes(t, n));
    std::vector<float> y(n);
    QuantizeKvRow(t, x.data(), q.data(), n);
    DequantizeKvRow(t, q.data(), y.data(), n);
    double worst = 0;
    for (int64_t b = 0; b < n; b += 32) {
      float amax = 0;
      for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b + j]));
      for (int j = 0; j < 32; ++j) worst = std::max<double>(worst, std::fabs(y[b + j] - x[b + j]) / amax);
    }
    EXPECT_LE(worst, rel) << KvTypeName(t);
    if (t != KvType::kF32) {
      EXPECT_GT(worst, 0.0) << KvTypeName(t);
    }
  }
}

TEST(KvQuant, RotationSizesFollowLlamaCpp) {
  // K: the largest power of two >= 64 dividing the head dim; V: 64; none for F32/F16/BF16 or D % 64 != 0.
  EXPECT_EQ(KvRotationSize(KvType::kQ8_0, 256, true), 256);
  EXPECT_EQ(KvRotationSize(KvType::kQ8_0, 192, true), 64);
  EXPECT_EQ(KvRotationSize(KvType::kQ4_0, 128, true), 128);
  EXPECT_EQ(KvRotationSize(KvType::kQ4_0, 256, false), 64);
  EXPECT_EQ(KvRotationSize(KvType::kIQ4_NL, 96, true), 0);
  EXPECT_EQ(KvRotationSize(KvType::kF16, 256, true), 0);
  EXPECT_EQ(KvRotationSize(KvType::kBF16, 256, false), 0);
}

TEST(KvQuant, HadamardRotationIsTheOrthonormalSylvesterMatrixAndItsOwnInverse) {
  for (int32_t size : {64, 128, 256}) {
    const int64_t n = 2 * size;
    auto x = RandomRow(n, static_cast<uint32_t>(size), 2.0f);
    std::vector<float> y = x;
    HadamardRotate(y.data(), n, size);
    // Sylvester H[i][j] = (-1)^popcount(i & j) / sqrt(size), per chunk, in double.
    for (int64_t c = 0; c < n; c += size)
      for (int32_t i = 0; i < size; ++i) {
        double want = 0;
        for (int32_t j = 0; j < size; ++j)
          want += (__builtin_popcount(static_cast<unsigned>(i & j)) % 2 ? -1.0 : 1.0) * x[c + j];
        want /= std::sqrt(static_cast<double>(size));
        ASSERT_NEAR(y[c + i], want, 1e-5) << size << " " << c + i;
      }
    HadamardRotate(y.data(), n, size);
    for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(y[i], x[i], 1e-5) << size;
  }
}

}  // namespace
}  // namespace rw::kernels
