// Tests of gguf/quants_lowbit.h: dequantisation against blocks quantised and dequantised by llama.cpp v0.5.0
// (tests/data/quants_lowbit), the integer form against the dequantisation, the reference dot product against
// the dot of the dequantised rows, and hand-built blocks.
#include "gguf/quants_lowbit.h"

#include "gguf/quants_lowbit_testing.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace rw::gguf {
namespace {

using TT = TensorType;

using testing::kLowbitTypes;
using testing::RandomLowbitRow;

struct Record {
  TT type;
  int64_t cols, rows;
  std::vector<uint8_t> quant;
  std::vector<float> dequant;
};

std::vector<Record> ReadLlamaBlocks() {
  const std::string path = std::string(REWIND_TEST_DATA) + "/quants_lowbit/llama_dequant_blocks.bin";
  std::vector<Record> out;
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return out;
  uint32_t type;
  while (std::fread(&type, 4, 1, f) == 1) {
    Record r;
    r.type = static_cast<TT>(type);
    if (std::fread(&r.cols, 8, 1, f) != 1 || std::fread(&r.rows, 8, 1, f) != 1 || !GetTypeInfo(r.type)) break;
    r.quant.resize(RowBytes(r.type, r.cols) * r.rows);
    r.dequant.resize(r.cols * r.rows);
    if (std::fread(r.quant.data(), 1, r.quant.size(), f) != r.quant.size()) break;
    if (std::fread(r.dequant.data(), 4, r.dequant.size(), f) != r.dequant.size()) break;
    out.push_back(std::move(r));
  }
  std::fclose(f);
  return out;
}

TEST(QuantsLowbit, DequantisationIsBitIdenticalToLlamaCppForEveryType) {
  const auto records = ReadLlamaBlocks();
  std::set<TT> seen;
  for (const Record& r : records) {
    ASSERT_TRUE(IsSupportedWeightType(r.type)) << TypeName(r.type);
    const size_t rb = RowBytes(r.type, r.cols);
    std::vector<float> got(r.cols);
    for (int64_t row = 0; row < r.rows; ++row) {
      DequantizeRow(r.type, r.quant.data() + row * rb, got.data(), r.cols);
      for (int64_t i = 0; i < r.cols; ++i) {
        const float want = r.dequant[row * r.cols + i];
        ASSERT_EQ(std::memcmp(&got[i], &want, 4), 0)
            << TypeName(r.type) << " row " << row << " element " << i << ": " << got[i] << " vs " << want;
      }
    }
    seen.insert(r.type);
  }
  for (TT t : kLowbitTypes) EXPECT_TRUE(seen.count(t)) << "no llama.cpp blocks for " << TypeName(t);
}

// The dot product of the integer form must equal the dot product of the dequantised weights (up to the
// rounding of the float scales).
TEST(QuantsLowbit, ReferenceDotEqualsDotOfDequantisedRows) {
  std::mt19937 rng(11);
  for (TT t : kLowbitTypes) {
    const int64_t n = 4 * 256;
    const TT at = VecDotType(t);
    const auto w = RandomLowbitRow(t, n, rng);
    std::vector<float> x(n);
    std::normal_distribution<float> dist(0.0f, 2.0f);
    for (auto& v : x) v = dist(rng);
    std::vector<uint8_t> a(RowBytes(at, n));
    QuantizeActivationRow(at, x.data(), a.data(), n);
    std::vector<float> wd(n), ad(n);
    DequantizeRow(t, w.data(), wd.data(), n);
    DequantizeRow(at, a.data(), ad.data(), n);
    double exact = 0, mag = 0;
    for (int64_t i = 0; i < n; ++i) {
      exact += double(wd[i]) * ad[i];
      mag += std::fabs(double(wd[i]) * ad[i]);
    }
    ASSERT_GT(mag, 0) << TypeName(t);
    EXPECT_NEAR(VecDotRef(t, n, w.data(), a.data()), exact, 2e-6 * mag) << TypeName(t);
  }
}

TEST(QuantsLowbit, IntegerFormReproducesTheDequantisedValues) {
  std::mt19937 rng(3);
  for (TT t : kLowbitTypes) {
    if (!IsLowbitKType(t)) continue;
    const auto w = RandomLowbitRow(t, 256, rng);
    DecodedK dec;
    DecodeK(t, w.data(), &dec);
    std::vector<float> wd(256);
    DequantizeRow(t, w.data(), wd.data(), 256);
    const double f = DotFactorK(t);
    for (int j = 0; j < 256; ++j) {
      const double v = f * dec.d * dec.sc[j / 16] * dec.q[j] - double(dec.dmin) * dec.mins[j / 16];
      ASSERT_NEAR(wd[j], v, 1e-6 * std::fabs(v) + 1e-12) << TypeName(t) << " element " << j;
    }
  }
}

TEST(QuantsLowbit, HandBuiltBlocksDequantiseToKnownValues) {
  // Q2_K: scale nibble 3, min nibble 1, all quants 2, d = 1, dmin = 0.5: 3 * 2 - 0.5 = 5.5.
  BlockQ2_K q2{};
  std::memset(q2.scales, 0x13, 16);
  std::memset(q2.qs, 0xAA, 64);
  q2.d = Fp32ToFp16(1.0f);
  q2.dmin = Fp32ToFp16(0.5f);
  float y[256];
  DequantizeRow(TT::kQ2_K, &q2, y, 256);
  for (float v : y) ASSERT_EQ(v, 5.5f);
  // IQ4_NL: index 0 is -127, index 15 is 113; d = 0.5.
  BlockIQ4_NL nl{};
  nl.d = Fp32ToFp16(0.5f);
  std::memset(nl.qs, 0xF0, 16);
  DequantizeRow(TT::kIQ4_NL, &nl, y, 32);
  EXPECT_EQ(y[0], -63.5f);
  EXPECT_EQ(y[16], 56.5f);
  // MXFP4: e = 128 gives 2^0 / 1 for the doubled values: index 7 is 12 -> 12 * 2^0.
  BlockMXFP4 mx{};
  mx.e = 128;
  std::memset(mx.qs, 0x97, 16);  // low 7 -> 12, high 9 -> -1
  DequantizeRow(TT::kMXFP4, &mx, y, 32);
  EXPECT_EQ(y[0], 12.0f);
  EXPECT_EQ(y[16], -1.0f);
  EXPECT_EQ(E8M0Half(0), std::ldexp(1.0f, -128));
  EXPECT_EQ(E8M0Half(1), std::ldexp(1.0f, -127));
}

TEST(QuantsLowbit, LowbitTypesDequantiseButDoNotQuantise) {
  for (TT t : kLowbitTypes) {
    EXPECT_TRUE(IsSupportedWeightType(t)) << TypeName(t);
    EXPECT_FALSE(IsQuantizableType(t)) << TypeName(t);
    EXPECT_EQ(BlockSize(t), GetTypeInfo(t)->block_size);
    EXPECT_EQ(RowBytes(t, 256 * 2), static_cast<size_t>(GetTypeInfo(t)->block_bytes * 512 / BlockSize(t)));
  }
}

}  // namespace
}  // namespace rw::gguf
