// GPU kernels against their CPU twins, on whatever Vulkan device the machine has (lavapipe in CI). Every test
// skips with a message when no Vulkan device exists.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "gguf/quants.h"
#include "gpu/device.h"
#include "gpu/gpu_testing.h"
#include "gpu/ops.h"
#include "kernels/matmul.h"
#include "kernels/norm.h"
#include "kernels/random_testing.h"

namespace rw::gpu {
namespace {

using TT = gguf::TensorType;

// The first Vulkan device, opened once for the whole binary; nullptr (and the reason) when there is none.
Context* TestDevice(std::string* why) {
  static std::shared_ptr<Context> ctx;
  static std::string reason;
  static bool tried = false;
  if (!tried) {
    tried = true;
    auto c = OpenDevice(0);
    if (c.ok()) ctx = *c;
    else reason = c.error().message;
  }
  *why = reason;
  return ctx.get();
}

#define REQUIRE_DEVICE(ctx)                                                    \
  std::string why_;                                                            \
  Context* ctx = TestDevice(&why_);                                            \
  if (ctx == nullptr) GTEST_SKIP() << "no Vulkan device: " << why_

TEST(GpuDevice, ListsTheDeviceItOpensWithANameAndMemory) {
  REQUIRE_DEVICE(ctx);
  auto devs = ListDevices();
  ASSERT_TRUE(devs.ok()) << devs.error().message;
  ASSERT_FALSE(devs->empty());
  EXPECT_EQ((*devs)[0].name, ctx->info().name);
  EXPECT_GT((*devs)[0].memory_bytes, 0u);
  const std::string list = FormatDeviceList();
  EXPECT_NE(list.find("cpu"), std::string::npos);
  EXPECT_NE(list.find("vulkan0"), std::string::npos) << list;
  std::printf("%s", list.c_str());
}

TEST(GpuDevice, DeviceNamesParseAndBadOnesAreClearErrors) {
  EXPECT_EQ(*ParseDeviceName("cpu"), -1);
  EXPECT_EQ(*ParseDeviceName("vulkan0"), 0);
  EXPECT_EQ(*ParseDeviceName("vulkan12"), 12);
  for (const char* bad : {"gpu", "vulkan", "vulkan-1", "vulkanx", "cuda0", ""}) {
    auto r = ParseDeviceName(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.error().message.find("vulkanN"), std::string::npos);
  }
  EXPECT_FALSE(OpenDevice(999).ok());
}

TEST(GpuDevice, BuffersRoundTripThroughStaging) {
  REQUIRE_DEVICE(ctx);
  std::vector<uint32_t> a(1000);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<uint32_t>(i * 2654435761u);
  for (bool unmapped : {false, true}) {  // unified memory (lavapipe) maps device buffers; a discrete GPU does not
    ctx->UnmapDeviceBuffersForTesting(unmapped);
    auto b = ctx->Alloc(a.size() * 4);
    ctx->UnmapDeviceBuffersForTesting(false);
    ASSERT_TRUE(b.ok());
    if (unmapped) ASSERT_EQ(b->mapped(), nullptr);
    ASSERT_TRUE(ctx->Upload(*b, a.data(), a.size() * 4).ok());
    std::vector<uint32_t> back(a.size());
    ASSERT_TRUE(ctx->Download(*b, back.data(), back.size() * 4).ok());
    EXPECT_EQ(a, back);
    EXPECT_FALSE(ctx->Upload(*b, a.data(), a.size() * 4, 8).ok()) << "past the end must be an error";
  }
}

// A chain of 2.5 x kFlushDispatches dispatches, each adding y into x in place (so each reads what the one before
// wrote), goes to the device in batches submitted without a wait (Context::Flush); halfway a staged upload
// replaces y while the earlier batches may still be reading it. Every step sees the one before it (the barriers
// reach across the batches) and the y of its half, and only the final wait counts as a submission. The values
// are multiples of 1/64 below 2^9: every sum is exact.
TEST(GpuDevice, DispatchesFlushedInBatchesRunInTheOrderRecorded) {
  REQUIRE_DEVICE(ctx);
  const uint32_t n = 100, steps = Context::kFlushDispatches * 5 / 2;
  ctx->UnmapDeviceBuffersForTesting(true);
  auto yb = ctx->Alloc(4 * n);
  ctx->UnmapDeviceBuffersForTesting(false);
  ASSERT_TRUE(yb.ok());
  std::vector<float> want(n, 0.0f), y0(n), y1(n);
  for (uint32_t i = 0; i < n; ++i) {
    y0[i] = static_cast<float>(i) / 64.0f;
    y1[i] = -static_cast<float>(i % 7) / 32.0f;
  }
  Buffer xb = testing::Up(*ctx, want);
  ASSERT_TRUE(ctx->Submit().ok());
  auto p = ctx->GetPipeline("eltwise");
  ASSERT_TRUE(p.ok());
  const uint64_t s0 = ctx->submits(), f0 = ctx->flushes();
  for (uint32_t k = 0; k < steps; ++k) {
    if (k == 0 || k == steps / 2) ASSERT_TRUE(ctx->Upload(*yb, (k == 0 ? y0 : y1).data(), 4 * n).ok());
    struct { uint32_t rows, width, a_off, a_stride, b_off, b_stride, mode; } pc{1, n, 0, 0, 0, 0, 0};  // a += b
    ctx->Dispatch(**p, {{&xb}, {&*yb}}, &pc, sizeof(pc), Groups(n));
    if (k + 1 == Context::kFirstFlushDispatches + 1)  // the first batch goes early (the device was idle)
      EXPECT_EQ(ctx->flushes() - f0, 1u) << "after " << k + 1 << " dispatches";
    for (uint32_t i = 0; i < n; ++i) want[i] += (k < steps / 2 ? y0 : y1)[i];
  }
  EXPECT_GE(ctx->flushes() - f0, 3u) << "the chain went to the device in batches of 32, 64, 128, ...";
  EXPECT_EQ(ctx->submits(), s0) << "no wait before the download";
  const std::vector<float> got = testing::Down(*ctx, xb, n);
  EXPECT_EQ(ctx->submits(), s0 + 1);
  EXPECT_EQ(0, std::memcmp(got.data(), want.data(), 4 * n));
}

// Staged uploads are recorded, not submitted: many small ones (a forward's inputs) share the upload arena and
// run in order with the dispatches around them; the next upload to the same bytes does not overwrite what an
// earlier recorded copy reads. Uploads over the arena's chunk go in chunks. Only the download waits.
TEST(GpuDevice, StagedUploadsAreRecordedInOrderWithoutSubmissions) {
  REQUIRE_DEVICE(ctx);
  ctx->UnmapDeviceBuffersForTesting(true);
  auto b = ctx->Alloc(4096 * 4);
  auto c = ctx->Alloc(4096 * 4);
  const size_t big_n = gpu::Context::kStagingChunk / 4 + 12345;  // over one chunk
  auto big = ctx->Alloc(big_n * 4);
  ctx->UnmapDeviceBuffersForTesting(false);
  ASSERT_TRUE(b.ok() && c.ok() && big.ok());
  ASSERT_TRUE(ctx->Submit().ok());
  std::vector<uint32_t> first(4096), second(4096);
  for (size_t i = 0; i < first.size(); ++i) {
    first[i] = static_cast<uint32_t>(i * 7 + 1);
    second[i] = static_cast<uint32_t>(i * 13 + 5);
  }
  const uint64_t s0 = ctx->submits();
  for (size_t part = 0; part < 8; ++part)  // 8 uploads of 512 values
    ASSERT_TRUE(ctx->Upload(*b, first.data() + 512 * part, 512 * 4, 512 * 4 * part).ok());
  ctx->Copy(*b, 0, *c, 0, 4096 * 4);                              // reads `first`
  ASSERT_TRUE(ctx->Upload(*b, second.data(), 4096 * 4).ok());   // then b is overwritten
  EXPECT_EQ(ctx->submits(), s0) << "a staged upload must be recorded, not submitted";
  std::vector<uint32_t> back_b(4096), back_c(4096);
  ASSERT_TRUE(ctx->Download(*c, back_c.data(), 4096 * 4).ok());
  ASSERT_TRUE(ctx->Download(*b, back_b.data(), 4096 * 4).ok());
  EXPECT_EQ(back_c, first);
  EXPECT_EQ(back_b, second);
  std::vector<uint32_t> v(big_n), back(big_n);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<uint32_t>(i * 2654435761u + 3);
  ASSERT_TRUE(ctx->Upload(*big, v.data(), v.size() * 4).ok());
  ASSERT_TRUE(ctx->Download(*big, back.data(), back.size() * 4).ok());
  EXPECT_TRUE(v == back);
}

// A random weight of `type`, quantised by the CPU quantiser (what llama-quantize writes).
std::vector<uint8_t> RandomWeight(TT type, int64_t rows, int64_t cols, uint32_t seed) {
  const size_t rb = gguf::RowBytes(type, cols);
  std::vector<uint8_t> w(rb * rows);
  const std::vector<float> f = kernels::Random(static_cast<size_t>(rows * cols), seed, 0.5f);
  for (int64_t r = 0; r < rows; ++r) gguf::QuantizeRow(type, f.data() + r * cols, w.data() + r * rb, cols);
  return w;
}

struct MatCase {
  TT type;
  int64_t rows, cols;
};

class GpuMatMul : public ::testing::TestWithParam<MatCase> {};

// Bits equal to the scalar reference twin (gguf::QuantizeActivationRow + gguf::VecDotRef) for every element, and
// within 1e-4 relative of the CPU's fast kernels (kernels::MatMul), whose float order differs.
TEST_P(GpuMatMul, MatchesTheScalarTwinBitForBitAndTheFastCpuKernelWithinRounding) {
  REQUIRE_DEVICE(ctx);
  const MatCase c = GetParam();
  const int64_t n_tok = 3;
  const std::vector<uint8_t> w = RandomWeight(c.type, c.rows, c.cols, 7);
  const size_t rb = gguf::RowBytes(c.type, c.cols);
  const std::vector<float> x = kernels::Random(static_cast<size_t>(n_tok * c.cols), 11);
  auto gm = UploadMatrix(*ctx, c.type, w.data(), c.cols, c.rows, rb);
  ASSERT_TRUE(gm.ok()) << gm.error().message;
  auto y = MatMulHost(*ctx, *gm, x.data(), n_tok);
  ASSERT_TRUE(y.ok()) << y.error().message;

  const TT at = gguf::VecDotType(c.type);
  std::vector<uint8_t> act(gguf::RowBytes(at, c.cols));
  std::vector<float> fast(static_cast<size_t>(n_tok * c.rows));
  kernels::Matrix m{c.type, w.data(), c.cols, c.rows, rb};
  kernels::MatMul(m, x.data(), n_tok, fast.data(), nullptr);
  int64_t same = 0;
  for (int64_t t = 0; t < n_tok; ++t) {
    gguf::QuantizeActivationRow(at, x.data() + t * c.cols, act.data(), c.cols);
    for (int64_t r = 0; r < c.rows; ++r) {
      const float ref = gguf::VecDotRef(c.type, c.cols, w.data() + r * rb, act.data());
      const float got = (*y)[t * c.rows + r];
      uint32_t a, b;
      std::memcpy(&a, &ref, 4);
      std::memcpy(&b, &got, 4);
      same += a == b;
      EXPECT_EQ(a, b) << gguf::TypeName(c.type) << " t=" << t << " r=" << r << " ref " << ref << " gpu " << got;
      const float f = fast[t * c.rows + r];
      EXPECT_NEAR(got, f, 1e-4f * (1.0f + std::fabs(f))) << gguf::TypeName(c.type) << " vs kernels::MatMul";
    }
  }
  EXPECT_EQ(same, n_tok * c.rows);
}

// I1 on the device: a token's outputs are the same bits whether it is alone or the 5th of 9 rows.
TEST_P(GpuMatMul, ATokensOutputsDoNotDependOnTheBatch) {
  REQUIRE_DEVICE(ctx);
  const MatCase c = GetParam();
  const std::vector<uint8_t> w = RandomWeight(c.type, c.rows, c.cols, 3);
  auto gm = UploadMatrix(*ctx, c.type, w.data(), c.cols, c.rows, gguf::RowBytes(c.type, c.cols));
  ASSERT_TRUE(gm.ok());
  const int64_t n = 9, at = 4;
  const std::vector<float> x = kernels::Random(static_cast<size_t>(n * c.cols), 5);
  auto all = MatMulHost(*ctx, *gm, x.data(), n);
  auto one = MatMulHost(*ctx, *gm, x.data() + at * c.cols, 1);
  ASSERT_TRUE(all.ok() && one.ok());
  EXPECT_EQ(0, std::memcmp(all->data() + at * c.rows, one->data(), c.rows * sizeof(float)));
}

INSTANTIATE_TEST_SUITE_P(
    Types, GpuMatMul,
    ::testing::Values(MatCase{TT::kF32, 13, 96}, MatCase{TT::kF16, 13, 96}, MatCase{TT::kBF16, 13, 96},
                      MatCase{TT::kQ8_0, 19, 128}, MatCase{TT::kQ4_0, 19, 128}, MatCase{TT::kQ4_1, 19, 128},
                      MatCase{TT::kQ5_0, 19, 128}, MatCase{TT::kQ5_1, 19, 128}, MatCase{TT::kQ4_K, 17, 512},
                      MatCase{TT::kQ5_K, 17, 512}, MatCase{TT::kQ6_K, 17, 512}),
    [](const ::testing::TestParamInfo<MatCase>& i) { return std::string(gguf::TypeName(i.param.type)); });

// The kernel variants (per element, rows, tile: ops.h MatMulKernel; F32 / F16 / BF16 have no rows variant,
// forcing it runs per element) give the scalar twin's bits for every element: token counts around the tile sizes
// (1, 3, 17, 64), a row count that is no multiple of a workgroup's rows, several blocks per row, an odd F16 row
// (a last chunk of 3 values, rows not 4-byte aligned), long rows (K-quants: 48 blocks, F32: 12,288 values: more
// loop trips than lavapipe allows an invocation if the constant inner loops were not unrolled), and row ranges
// split over dispatches by a lowered workgroup-count limit.
TEST(GpuMatMulKernels, EveryVariantGivesTheScalarTwinsBits) {
  REQUIRE_DEVICE(ctx);
  struct Case { TT type; int64_t rows, cols; };
  const Case cases[] = {{TT::kF32, 70, 1000},  {TT::kF16, 67, 4099}, {TT::kBF16, 600, 96},
                        {TT::kQ8_0, 70, 1184}, {TT::kQ4_0, 600, 1184}, {TT::kQ4_1, 70, 1184},
                        {TT::kQ5_0, 70, 1184}, {TT::kQ5_1, 70, 1184}, {TT::kQ4_K, 67, 3328},
                        {TT::kQ5_K, 67, 768},  {TT::kQ6_K, 67, 768},  {TT::kQ6_K, 9, 12288}, {TT::kF32, 9, 12288}};
  const MatMulKernel kernels_[] = {MatMulKernel::kPerElement, MatMulKernel::kRows, MatMulKernel::kTile};
  for (const Case& c : cases) {
    const std::vector<uint8_t> w = RandomWeight(c.type, c.rows, c.cols, 17);
    const size_t rb = gguf::RowBytes(c.type, c.cols);
    auto gm = UploadMatrix(*ctx, c.type, w.data(), c.cols, c.rows, rb);
    ASSERT_TRUE(gm.ok()) << gm.error().message;
    const TT at = gguf::VecDotType(c.type);
    std::vector<uint8_t> act(gguf::RowBytes(at, c.cols));
    for (const int64_t n_tok : {1, 3, 17, 64}) {
      if (c.cols > 4096 && n_tok > 17) continue;  // the long row: enough to pass lavapipe's loop limit
      const std::vector<float> x = kernels::Random(static_cast<size_t>(n_tok * c.cols), 23 + n_tok);
      std::vector<float> ref(static_cast<size_t>(n_tok * c.rows));
      for (int64_t t = 0; t < n_tok; ++t) {
        gguf::QuantizeActivationRow(at, x.data() + t * c.cols, act.data(), c.cols);
        for (int64_t r = 0; r < c.rows; ++r)
          ref[t * c.rows + r] = gguf::VecDotRef(c.type, c.cols, w.data() + r * rb, act.data());
      }
      for (const MatMulKernel k : kernels_) {
        for (const uint32_t groups : {0u, 8u}) {  // 0: the device's limit; 8: rows in several dispatches
          // (8 groups per dimension fold at most 8^3 x 64 activation values: F16 / BF16 convert one per invocation)
          if (groups == 8 && gguf::BlockSize(c.type) == 1 && n_tok * c.cols > 8 * 8 * 8 * 64) continue;
          // The rows and tile kernels of the 32-value block types with and without the packed dot product.
          for (const IntDot dot : {IntDot::kOff, IntDot::kOn}) {
            if (dot == IntDot::kOn && (!ctx->has_int_dot() || gguf::BlockSize(c.type) != 32 ||
                                       k == MatMulKernel::kPerElement))
              continue;
            ctx->LimitForTesting(groups, 0);
            auto y = MatMulHost(*ctx, *gm, x.data(), n_tok, k, dot);
            ctx->LimitForTesting(0, 0);
            ASSERT_TRUE(y.ok()) << y.error().message;
            int64_t differ = 0;
            for (size_t e = 0; e < ref.size(); ++e) differ += std::memcmp(&ref[e], &(*y)[e], 4) != 0;
            EXPECT_EQ(differ, 0) << gguf::TypeName(c.type) << " K=" << c.cols << " N=" << n_tok << " variant "
                                 << static_cast<int>(k) << " max groups " << groups << " int dot "
                                 << (dot == IntDot::kOn);
          }
        }
      }
    }
  }
}

// n bytes of every value (a linear congruential generator's high byte), for blocks of raw quantised bytes.
std::vector<uint8_t> RandomBytes(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  for (uint8_t& b : v) {
    seed = seed * 1664525u + 1013904223u;
    b = static_cast<uint8_t>(seed >> 24);
  }
  return v;
}

// The K-quant tile with the packed dot product (Q4_K, Q5_K, Q6_K: matmul.comp's KDOT, each lane's sum of a
// sub-block or group by a Dot4 over bytes gathered 8 apart) over every byte value: blocks of random bytes (every
// nibble, high bit and scale / min) with fixed d and dmin, activations with extreme values; the scalar twin's
// bits, for token counts that fill and do not fill the tile's 8.
TEST(GpuMatMulKernels, TheKQuantTileWithTheIntegerDotProductGivesTheScalarTwinsBits) {
  REQUIRE_DEVICE(ctx);
  if (!ctx->has_int_dot()) GTEST_SKIP() << ctx->info().name << " lacks VK_KHR_shader_integer_dot_product";
  const int64_t rows = 70, cols = 1024;
  for (const TT type : {TT::kQ4_K, TT::kQ5_K, TT::kQ6_K}) {
    const size_t rb = gguf::RowBytes(type, cols), bsz = rb / (cols / 256);
    std::vector<uint8_t> w = RandomBytes(rb * rows, 777);
    for (size_t blk = 0; blk < w.size(); blk += bsz) {  // d = 0.0625, dmin = 0.03125 (f16 0x2C00, 0x2800)
      const size_t at = type == TT::kQ6_K ? blk + 208 : blk;  // Q6_K: d last, no dmin
      w[at] = 0x00;
      w[at + 1] = 0x2C;
      if (type != TT::kQ6_K) {
        w[blk + 2] = 0x00;
        w[blk + 3] = 0x28;
      }
    }
    auto gm = UploadMatrix(*ctx, type, w.data(), cols, rows, rb);
    ASSERT_TRUE(gm.ok()) << gm.error().message;
    for (const int64_t n_tok : {int64_t{5}, int64_t{19}}) {
      std::vector<float> x = kernels::Random(static_cast<size_t>(n_tok * cols), 78);
      for (size_t i = 0; i < x.size(); i += 7) x[i] = (i % 2 ? 1.0f : -1.0f) * 8.0f;
      std::vector<uint8_t> act(gguf::RowBytes(TT::kQ8_K, cols));
      std::vector<float> ref(static_cast<size_t>(n_tok * rows));
      for (int64_t t = 0; t < n_tok; ++t) {
        gguf::QuantizeActivationRow(TT::kQ8_K, x.data() + t * cols, act.data(), cols);
        for (int64_t r = 0; r < rows; ++r) ref[t * rows + r] = gguf::VecDotRef(type, cols, w.data() + r * rb, act.data());
      }
      auto y = MatMulHost(*ctx, *gm, x.data(), n_tok, MatMulKernel::kTile, IntDot::kOn);
      ASSERT_TRUE(y.ok()) << y.error().message;
      int64_t differ = 0;
      for (size_t e = 0; e < ref.size(); ++e) differ += std::memcmp(&ref[e], &(*y)[e], 4) != 0;
      EXPECT_EQ(differ, 0) << gguf::TypeName(type) << " " << n_tok << " tokens";
    }
  }
}

// The packed dot product's weight repacking (Q4_0: q - 8, Q5_0: q - 16, the high bits of Q5_0 / Q5_1) over every
// byte value: blocks of random bytes (every nibble and high-bit pattern) with a fixed scale, activations with
// extreme values (+-127) mixed in; the `_dot` rows and tile kernels give the scalar twin's bits.
TEST(GpuMatMulKernels, TheIntegerDotProductGivesTheScalarTwinsBitsOnEveryByteValue) {
  REQUIRE_DEVICE(ctx);
  if (!ctx->has_int_dot()) GTEST_SKIP() << ctx->info().name << " lacks VK_KHR_shader_integer_dot_product";
  std::printf("%s: integer dot product %s\n", ctx->info().name.c_str(),
              ctx->int_dot_accelerated() ? "accelerated (kAuto uses it)" : "not accelerated (kAuto leaves it off)");
  const int64_t rows = 70, cols = 1024, n_tok = 19;
  for (const TT type : {TT::kQ8_0, TT::kQ4_0, TT::kQ4_1, TT::kQ5_0, TT::kQ5_1}) {
    const size_t rb = gguf::RowBytes(type, cols), bsz = rb / (cols / 32);
    std::vector<uint8_t> w = RandomBytes(rb * rows, 12345);
    for (size_t blk = 0; blk < w.size(); blk += bsz) {  // d = 0.0625 (f16 0x2C00), Q4_1 / Q5_1 m = -0.5 (0xB800)
      w[blk] = 0x00;
      w[blk + 1] = 0x2C;
      if (type == TT::kQ4_1 || type == TT::kQ5_1) {
        w[blk + 2] = 0x00;
        w[blk + 3] = 0xB8;
      }
    }
    std::vector<float> x = kernels::Random(static_cast<size_t>(n_tok * cols), 77);
    for (size_t i = 0; i < x.size(); i += 7) x[i] = (i % 2 ? 1.0f : -1.0f) * 8.0f;  // the block maxima: +-127
    auto gm = UploadMatrix(*ctx, type, w.data(), cols, rows, rb);
    ASSERT_TRUE(gm.ok()) << gm.error().message;
    const TT at = gguf::VecDotType(type);
    std::vector<uint8_t> act(gguf::RowBytes(at, cols));
    std::vector<float> ref(static_cast<size_t>(n_tok * rows));
    for (int64_t t = 0; t < n_tok; ++t) {
      gguf::QuantizeActivationRow(at, x.data() + t * cols, act.data(), cols);
      for (int64_t r = 0; r < rows; ++r) ref[t * rows + r] = gguf::VecDotRef(type, cols, w.data() + r * rb, act.data());
    }
    for (const MatMulKernel k : {MatMulKernel::kRows, MatMulKernel::kTile}) {
      auto y = MatMulHost(*ctx, *gm, x.data(), n_tok, k, IntDot::kOn);
      ASSERT_TRUE(y.ok()) << y.error().message;
      int64_t differ = 0;
      for (size_t e = 0; e < ref.size(); ++e) differ += std::memcmp(&ref[e], &(*y)[e], 4) != 0;
      EXPECT_EQ(differ, 0) << gguf::TypeName(type) << " variant " << static_cast<int>(k);
    }
  }
}

// I1 across variants: a token's row in a 513-token prefill (the tile variant) has the bits of the same token
// alone (the rows variant).
TEST(GpuMatMulKernels, APrefillTokenEqualsTheSameTokenDecodedAlone) {
  REQUIRE_DEVICE(ctx);
  for (const TT type : {TT::kQ8_0, TT::kQ4_K}) {
    const int64_t rows = 40, cols = 512, n = 513;
    const std::vector<uint8_t> w = RandomWeight(type, rows, cols, 29);
    auto gm = UploadMatrix(*ctx, type, w.data(), cols, rows, gguf::RowBytes(type, cols));
    ASSERT_TRUE(gm.ok());
    const std::vector<float> x = kernels::Random(static_cast<size_t>(n * cols), 31);
    auto all = MatMulHost(*ctx, *gm, x.data(), n);
    ASSERT_TRUE(all.ok());
    for (const int64_t at : {0, 255, 512}) {
      auto one = MatMulHost(*ctx, *gm, x.data() + at * cols, 1);
      ASSERT_TRUE(one.ok());
      EXPECT_EQ(0, std::memcmp(all->data() + at * rows, one->data(), rows * sizeof(float)))
          << gguf::TypeName(type) << " token " << at;
    }
  }
}

TEST(GpuMatMulTypes, AnUnsupportedWeightTypeIsAnErrorNamingIt) {
  REQUIRE_DEVICE(ctx);
  std::vector<uint8_t> w(gguf::RowBytes(TT::kQ2_K, 256) * 2);
  auto gm = UploadMatrix(*ctx, TT::kQ2_K, w.data(), 256, 2, gguf::RowBytes(TT::kQ2_K, 256));
  ASSERT_FALSE(gm.ok());
  EXPECT_NE(gm.error().message.find("Q2_K"), std::string::npos) << gm.error().message;
}

TEST(GpuRmsNorm, MatchesKernelsRmsNormBitForBit) {
  REQUIRE_DEVICE(ctx);
  const uint32_t rows = 5, n = 72;
  const std::vector<float> x = kernels::Random(rows * n, 21), w = kernels::Random(n, 22);
  Buffer xb = testing::Up(*ctx, x), wb = testing::Up(*ctx, w), ob = testing::Up(*ctx, x);
  ASSERT_TRUE(RecordRmsNorm(*ctx, xb, 0, n, rows, n, &wb, 1e-6f, ob, 0, n).ok());
  const std::vector<float> got = testing::Down(*ctx, ob, x.size());
  std::vector<float> want(x.size());
  for (uint32_t r = 0; r < rows; ++r) kernels::RmsNorm(x.data() + r * n, w.data(), n, 1e-6f, want.data() + r * n);
  EXPECT_EQ(0, std::memcmp(got.data(), want.data(), 4 * got.size()));
}

// Rows of kRmsWideMinN values and more run a workgroup per row: Σx² as 64 strided partials in double (lane l:
// elements l, l + 64, ...), added in a fixed tree. The bits of that order computed here on the host, for rows of
// 600 (not a multiple of 64) and 4,096 values, each row alone and all of them in one dispatch; and the CPU's
// serial order within rounding.
TEST(GpuRmsNorm, WideRowsGiveTheirFixedTreeOrdersBitsAndTheCpusWithinRounding) {
  REQUIRE_DEVICE(ctx);
  for (const uint32_t n : {600u, 4096u}) {
    const uint32_t rows = 3;
    const std::vector<float> x = kernels::Random(rows * n, 23, 3.0f), w = kernels::Random(n, 24);
    Buffer xb = testing::Up(*ctx, x), wb = testing::Up(*ctx, w), ob = testing::Up(*ctx, x);
    ASSERT_TRUE(RecordRmsNorm(*ctx, xb, 0, n, rows, n, &wb, 1e-6f, ob, 0, n).ok());
    const std::vector<float> all = testing::Down(*ctx, ob, x.size());
    std::vector<float> alone(x.size());
    for (uint32_t r = 0; r < rows; ++r) {
      ASSERT_TRUE(RecordRmsNorm(*ctx, xb, r * n, n, 1, n, &wb, 1e-6f, ob, r * n, n).ok());
      ASSERT_TRUE(ctx->Download(ob, alone.data() + r * n, 4 * n, 4 * r * n).ok());
    }
    EXPECT_EQ(0, std::memcmp(all.data(), alone.data(), 4 * all.size())) << "n " << n << ": a row alone";
    for (uint32_t r = 0; r < rows; ++r) {
      const float* xr = x.data() + r * n;
      double part[64] = {};
      for (uint32_t l = 0; l < 64; ++l)
        for (uint32_t i = l; i < n; i += 64) {
          const float p = xr[i] * xr[i];
          part[l] += static_cast<double>(p);
        }
      for (uint32_t s = 32; s > 0; s >>= 1)
        for (uint32_t l = 0; l < s; ++l) part[l] = part[l] + part[l + s];
      const float mean = static_cast<float>(part[0] / static_cast<double>(n));
      const float scale = 1.0f / std::sqrt(mean + 1e-6f);
      std::vector<float> cpu(n);
      kernels::RmsNorm(xr, w.data(), n, 1e-6f, cpu.data());
      for (uint32_t i = 0; i < n; ++i) {
        const float v = xr[i] * scale;
        const float want = v * w[i];
        ASSERT_EQ(0, std::memcmp(&want, &all[r * n + i], 4)) << "n " << n << " row " << r << " i " << i;
        EXPECT_NEAR(all[r * n + i], cpu[i], 1e-6f * (1.0f + std::fabs(cpu[i]))) << "n " << n << " row " << r;
      }
    }
  }
}

// The residual add in the norm's dispatch (RecordRmsNorm's `add`): x holds x + y afterwards and the output is
// the norm of the sums, the bits of the element-wise add followed by the norm, for a per-head row (serial) and a
// hidden-size row (a workgroup per row).
TEST(GpuRmsNorm, TheResidualAddInTheNormsDispatchGivesTheTwoDispatchesBits) {
  REQUIRE_DEVICE(ctx);
  for (const uint32_t n : {72u, 600u}) {
    const uint32_t rows = 3;
    const std::vector<float> x = kernels::Random(rows * n, 25), y = kernels::Random(rows * n, 26),
                             w = kernels::Random(n, 27);
    Buffer x1 = testing::Up(*ctx, x), x2 = testing::Up(*ctx, x), yb = testing::Up(*ctx, y), wb = testing::Up(*ctx, w),
           o1 = testing::Up(*ctx, x), o2 = testing::Up(*ctx, x);
    ASSERT_TRUE(RecordEltwise(*ctx, x1, yb, 0, 1, rows * n).ok());  // x1 += y
    ASSERT_TRUE(RecordRmsNorm(*ctx, x1, 0, n, rows, n, &wb, 1e-6f, o1, 0, n).ok());
    ASSERT_TRUE(RecordRmsNorm(*ctx, x2, 0, n, rows, n, &wb, 1e-6f, o2, 0, n, &yb).ok());
    const std::vector<float> sum1 = testing::Down(*ctx, x1, x.size()), sum2 = testing::Down(*ctx, x2, x.size()),
                             out1 = testing::Down(*ctx, o1, x.size()), out2 = testing::Down(*ctx, o2, x.size());
    EXPECT_EQ(0, std::memcmp(sum1.data(), sum2.data(), 4 * x.size())) << "n " << n << ": the sums";
    EXPECT_EQ(0, std::memcmp(out1.data(), out2.data(), 4 * x.size())) << "n " << n << ": the norms";
    EXPECT_NE(0, std::memcmp(sum2.data(), x.data(), 4 * x.size())) << "x was updated";
  }
}

// The gated norm (a GDN layer's per-head RMSNorm times silu(z)) in one dispatch gives the bits of the norm and
// an element-wise a·silu(z) after it.
TEST(GpuRmsNorm, TheGateInTheNormsDispatchGivesTheTwoDispatchesBits) {
  REQUIRE_DEVICE(ctx);
  for (const uint32_t n : {64u, 600u}) {
    const uint32_t rows = 5;
    const std::vector<float> x = kernels::Random(rows * n, 31), z = kernels::Random(rows * n, 32, 4.0f),
                             w = kernels::Random(n, 33);
    Buffer xb = testing::Up(*ctx, x), zb = testing::Up(*ctx, z), wb = testing::Up(*ctx, w), o1 = testing::Up(*ctx, x),
           o2 = testing::Up(*ctx, x);
    ASSERT_TRUE(RecordRmsNorm(*ctx, xb, 0, n, rows, n, &wb, 1e-6f, o1, 0, n).ok());
    ASSERT_TRUE(RecordEltwise(*ctx, o1, zb, 2, rows, n, 0, n, 0, n).ok());  // o1 = o1·silu(z)
    ASSERT_TRUE(RecordRmsNorm(*ctx, xb, 0, n, rows, n, &wb, 1e-6f, o2, 0, n, nullptr, &zb).ok());
    const std::vector<float> two = testing::Down(*ctx, o1, x.size()), one = testing::Down(*ctx, o2, x.size());
    EXPECT_EQ(0, std::memcmp(two.data(), one.data(), 4 * x.size())) << "n " << n;
    EXPECT_NE(two[1], x[1]);
  }
}

// SwiGLU computed in the down projection's activation conversion gives the bits of an element-wise SwiGLU and a
// plain matmul, for each conversion (Q8_0, Q8_1, Q8_K, F16 rows) and for F32 weights, which read the rows in place.
TEST(GpuMatMulKernels, SwiGluInTheActivationsConversionGivesTheSeparateDispatchesBits) {
  REQUIRE_DEVICE(ctx);
  const int64_t rows = 24, cols = 512, n_tok = 5;
  for (const TT type : {TT::kQ8_0, TT::kQ4_1, TT::kQ4_K, TT::kQ6_K, TT::kF16, TT::kF32}) {
    const std::vector<uint8_t> w = RandomWeight(type, rows, cols, 41);
    auto gm = UploadMatrix(*ctx, type, w.data(), cols, rows, gguf::RowBytes(type, cols));
    ASSERT_TRUE(gm.ok()) << gm.error().message;
    const std::vector<float> g = kernels::Random(static_cast<size_t>(n_tok * cols), 42, 3.0f),
                             u = kernels::Random(static_cast<size_t>(n_tok * cols), 43);
    Buffer g1 = testing::Up(*ctx, g), g2 = testing::Up(*ctx, g), ub = testing::Up(*ctx, u);
    auto y1 = ctx->Alloc(4 * rows * n_tok), y2 = ctx->Alloc(4 * rows * n_tok);
    ASSERT_TRUE(y1.ok() && y2.ok());
    ActScratch s;
    ASSERT_TRUE(RecordEltwise(*ctx, g1, ub, 1, 1, n_tok * cols).ok());  // g1 = silu(g1)·u
    ASSERT_TRUE(RecordMatMul(*ctx, *gm, g1, 0, n_tok, *y1, 0, rows, s).ok());
    const uint64_t d0 = ctx->dispatches();
    ASSERT_TRUE(RecordSwiGluMatMul(*ctx, *gm, g2, ub, n_tok, *y2, 0, rows, s).ok());
    EXPECT_EQ(ctx->dispatches() - d0, 2u) << gguf::TypeName(type) << ": the conversion (F32: the SwiGLU) and the product";
    const std::vector<float> a = testing::Down(*ctx, *y1, rows * n_tok), b = testing::Down(*ctx, *y2, rows * n_tok);
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), 4 * a.size())) << gguf::TypeName(type);
    EXPECT_NE(a[0], 0.0f);
  }
}

// A hidden-size norm that converts its rows for the next matmul gives the bits of the plain norm and that matmul's
// own conversion, in one dispatch less (every activation type, narrow and wide rows, with the residual add).
TEST(GpuRmsNorm, ConvertingItsRowsForTheNextMatMulGivesTheSeparateDispatchesBits) {
  REQUIRE_DEVICE(ctx);
  const uint32_t rows = 3, out_rows = 8;
  for (const uint32_t n : {256u, 1024u}) {
    for (const TT type : {TT::kQ8_0, TT::kQ4_1, TT::kQ4_K, TT::kF16, TT::kBF16, TT::kF32}) {
      SCOPED_TRACE(std::string(gguf::TypeName(type)) + " n " + std::to_string(n));
      const std::vector<uint8_t> wq = RandomWeight(type, out_rows, n, 61);
      auto gm = UploadMatrix(*ctx, type, wq.data(), n, out_rows, gguf::RowBytes(type, n));
      ASSERT_TRUE(gm.ok()) << gm.error().message;
      const std::vector<float> x = kernels::Random(rows * n, 62, 2.0f), y = kernels::Random(rows * n, 63),
                               w = kernels::Random(n, 64);
      Buffer x1 = testing::Up(*ctx, x), x2 = testing::Up(*ctx, x), yb = testing::Up(*ctx, y), wb = testing::Up(*ctx, w),
             o1 = testing::Up(*ctx, x), o2 = testing::Up(*ctx, x);
      auto p1 = ctx->Alloc(4 * rows * out_rows), p2 = ctx->Alloc(4 * rows * out_rows);
      ASSERT_TRUE(p1.ok() && p2.ok());
      ActScratch s;
      ASSERT_TRUE(RecordRmsNorm(*ctx, x1, 0, n, rows, n, &wb, 1e-6f, o1, 0, n, &yb).ok());
      ASSERT_TRUE(RecordMatMul(*ctx, *gm, o1, 0, rows, *p1, 0, out_rows, s).ok());
      const uint64_t d0 = ctx->dispatches();
      ASSERT_TRUE(RecordRmsNormForMatMul(*ctx, x2, rows, n, wb, 1e-6f, o2, &yb, type, s).ok());
      ASSERT_TRUE(RecordMatMul(*ctx, *gm, o2, 0, rows, *p2, 0, out_rows, s, {true, false}).ok());
      EXPECT_EQ(ctx->dispatches() - d0, 2u) << "the norm (converting) and the product";
      const std::vector<float> a = testing::Down(*ctx, *p1, rows * out_rows), b = testing::Down(*ctx, *p2, rows * out_rows),
                               n1 = testing::Down(*ctx, o1, rows * n), n2 = testing::Down(*ctx, o2, rows * n),
                               s2 = testing::Down(*ctx, x2, rows * n), s1 = testing::Down(*ctx, x1, rows * n);
      EXPECT_EQ(0, std::memcmp(n1.data(), n2.data(), 4 * n1.size())) << "the norm's rows";
      EXPECT_EQ(0, std::memcmp(s1.data(), s2.data(), 4 * s1.size())) << "the residual sums";
      EXPECT_EQ(0, std::memcmp(a.data(), b.data(), 4 * a.size())) << "the products";
      EXPECT_NE(a[0], 0.0f);
    }
  }
}

// The gated per-head norm of a GDN layer, in place, converting a token's heads side by side for the output
// projection: the bits of the plain gated norm and the projection's own conversion (Q8_0 blocks lie within a
// head of 128; Q8_K blocks of 256 do not, and get the plain norm and their own conversion).
TEST(GpuRmsNorm, TheGatedPerHeadNormConvertsATokensHeadsForTheNextMatMul) {
  REQUIRE_DEVICE(ctx);
  const uint32_t n_tok = 3, heads = 4, S = 128, K = heads * S, out_rows = 8;
  for (const TT type : {TT::kQ8_0, TT::kQ5_1, TT::kQ4_K, TT::kF32}) {
    SCOPED_TRACE(gguf::TypeName(type));
    const std::vector<uint8_t> wq = RandomWeight(type, out_rows, K, 71);
    auto gm = UploadMatrix(*ctx, type, wq.data(), K, out_rows, gguf::RowBytes(type, K));
    ASSERT_TRUE(gm.ok()) << gm.error().message;
    const std::vector<float> x = kernels::Random(n_tok * K, 72, 2.0f), z = kernels::Random(n_tok * K, 73, 3.0f),
                             w = kernels::Random(S, 74);
    Buffer x1 = testing::Up(*ctx, x), x2 = testing::Up(*ctx, x), zb = testing::Up(*ctx, z), wb = testing::Up(*ctx, w);
    auto p1 = ctx->Alloc(4 * n_tok * out_rows), p2 = ctx->Alloc(4 * n_tok * out_rows);
    ASSERT_TRUE(p1.ok() && p2.ok());
    ActScratch s;
    ASSERT_TRUE(RecordRmsNorm(*ctx, x1, 0, S, n_tok * heads, S, &wb, 1e-6f, x1, 0, S, nullptr, &zb).ok());
    ASSERT_TRUE(RecordMatMul(*ctx, *gm, x1, 0, n_tok, *p1, 0, out_rows, s).ok());
    const uint64_t d0 = ctx->dispatches();
    ASSERT_TRUE(
        RecordRmsNormForMatMul(*ctx, x2, n_tok * heads, S, wb, 1e-6f, x2, nullptr, type, s, &zb, n_tok).ok());
    ASSERT_TRUE(RecordMatMul(*ctx, *gm, x2, 0, n_tok, *p2, 0, out_rows, s, {true, false}).ok());
    EXPECT_EQ(ctx->dispatches() - d0, type == TT::kQ8_0 || type == TT::kQ5_1 ? 2u : type == TT::kF32 ? 2u : 3u);
    const std::vector<float> a = testing::Down(*ctx, *p1, n_tok * out_rows), b = testing::Down(*ctx, *p2, n_tok * out_rows),
                             n1 = testing::Down(*ctx, x1, n_tok * K), n2 = testing::Down(*ctx, x2, n_tok * K);
    EXPECT_EQ(0, std::memcmp(n1.data(), n2.data(), 4 * n1.size())) << "the gated norm's rows";
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), 4 * a.size())) << "the products";
    EXPECT_NE(a[0], 0.0f);
  }
}

}  // namespace
}  // namespace rw::gpu
