// The KV cache kernels of the quantised types (gpu/seq_ops.h): kv_scatter writes the bytes of the CPU's
// kernels::QuantizeKvRow for every cache type into scattered pool rows, and the Hadamard rotation gives the bits
// of kernels::HadamardRotate. Each test skips with a message without a Vulkan device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "gpu/device.h"
#include "gpu/gpu_testing.h"
#include "gpu/seq_ops.h"
#include "kernels/kv_quant.h"
#include "kernels/random_testing.h"

namespace rw::gpu {
namespace {

using testing::Down;
using testing::Up;

// Rows whose blocks cover the quantisers' corners: random values of several scales, a block of zeros, a constant
// block, a block whose largest magnitude is negative, one of tiny values (IQ4_NL's 1e-15 threshold), ties at
// the largest magnitude, exact halves after scaling.
std::vector<float> CornerRows(uint32_t n_rows, uint32_t KW, uint64_t seed) {
  std::vector<float> x = kernels::Random(static_cast<size_t>(n_rows) * KW, seed);
  for (size_t i = 0; i < x.size(); ++i) x[i] *= static_cast<float>(1u << (i / 96 % 7)) / 8.0f;
  auto block = [&](uint32_t row, uint32_t b) { return x.data() + static_cast<size_t>(row) * KW + 32u * b; };
  for (uint32_t j = 0; j < 32; ++j) {
    block(0, 0)[j] = 0.0f;
    block(0, 1)[j] = 0.75f;
    block(1, 0)[j] = j == 7 ? -3.0f : 0.1f * static_cast<float>(j % 5);
    block(1, 1)[j] = 1e-17f * static_cast<float>(j);
    block(2, 0)[j] = j % 2 == 0 ? 2.0f : -2.0f;
    block(2, 1)[j] = static_cast<float>(static_cast<int>(j) - 16) * 0.5f;
  }
  return x;
}

TEST(GpuKvScatter, EveryCacheTypeWritesTheCpusBytesIntoScatteredRows) {
  REQUIRE_DEVICE(ctx);
  const uint32_t KW = 256, n = 9, pool_rows = 20;
  const std::vector<float> x = CornerRows(n, KW, 71);
  std::vector<int32_t> tab;
  for (uint32_t i = 0; i < n; ++i) tab.insert(tab.end(), {static_cast<int32_t>(i), static_cast<int32_t>((7 * i + 3) % pool_rows)});
  Buffer xb = Up(*ctx, x), tb = Up(*ctx, tab);
  for (const kernels::KvType t : kernels::kAllKvTypes) {
    SCOPED_TRACE(kernels::KvTypeName(t));
    const size_t rb = kernels::KvRowBytes(t, KW);
    const std::vector<uint8_t> fill((pool_rows * rb + 3) / 4 * 4, 0xA5);  // untouched rows keep this
    Buffer pool = Up(*ctx, fill);
    ASSERT_TRUE(RecordKvScatter(*ctx, xb, pool, tb, n, KW, kernels::KvTensorType(t)).ok());
    const std::vector<uint8_t> got = Down<uint8_t>(*ctx, pool, fill.size());
    std::vector<uint8_t> want = fill;
    for (uint32_t i = 0; i < n; ++i)
      kernels::QuantizeKvRow(t, x.data() + static_cast<size_t>(i) * KW, want.data() + tab[2 * i + 1] * rb, KW);
    size_t diff = 0, first = got.size();
    for (size_t b = 0; b < got.size(); ++b)
      if (got[b] != want[b]) {
        ++diff;
        first = std::min(first, b);
      }
    EXPECT_EQ(diff, 0u) << diff << " bytes differ, the first at " << first << " (pool row " << first / rb << ")";
  }
}

TEST(GpuKvScatter, RowsThatAreNotWholeBlocksAndUnknownTypesAreErrors) {
  REQUIRE_DEVICE(ctx);
  Buffer a = Up(*ctx, std::vector<float>(64)), b = Up(*ctx, std::vector<float>(64)), t = Up(*ctx, std::vector<int32_t>{0, 0});
  EXPECT_FALSE(RecordKvScatter(*ctx, a, b, t, 1, 48, gguf::TensorType::kQ8_0).ok());
  EXPECT_FALSE(RecordKvScatter(*ctx, a, b, t, 1, 63, gguf::TensorType::kF16).ok());
  EXPECT_FALSE(RecordKvScatter(*ctx, a, b, t, 1, 64, gguf::TensorType::kQ4_K).ok());
  EXPECT_FALSE(KvFormatCode(gguf::TensorType::kQ6_K).ok());
  EXPECT_TRUE(RecordKvScatter(*ctx, a, b, t, 1, 64, gguf::TensorType::kF32).ok());
  EXPECT_TRUE(ctx->Submit().ok());
}

TEST(GpuHadamard, EachChunkSizeGivesTheCpusBits) {
  REQUIRE_DEVICE(ctx);
  for (const uint32_t size : {64u, 128u, 256u}) {
    SCOPED_TRACE(size);
    std::vector<float> x = kernels::Random(size * 13, 90 + size);
    Buffer xb = Up(*ctx, x);
    ASSERT_TRUE(RecordHadamard(*ctx, xb, x.size(), size).ok());
    const std::vector<float> got = Down(*ctx, xb, x.size());
    kernels::HadamardRotate(x.data(), static_cast<int64_t>(x.size()), static_cast<int32_t>(size));
    EXPECT_EQ(0, std::memcmp(got.data(), x.data(), 4 * x.size()));
  }
  Buffer xb = Up(*ctx, std::vector<float>(96));
  EXPECT_FALSE(RecordHadamard(*ctx, xb, 96, 64).ok());
  EXPECT_FALSE(RecordHadamard(*ctx, xb, 96, 48).ok());
}

}  // namespace
}  // namespace rw::gpu
