// The MoE kernels against their CPU twins on whatever Vulkan device the machine has (lavapipe in CI): the
// expert-indexed matmul (bits of the scalar twin and of the dense matmul on the expert's rows, every weight
// type), the router (kernels::SoftmaxTopK) and the weighted combine (model/experts.cc's order). Each test skips
// with a message without a device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "base/check.h"
#include "gguf/quants.h"
#include "gpu/device.h"
#include "gpu/gpu_testing.h"
#include "gpu/ops.h"
#include "kernels/activation.h"
#include "kernels/moe_route.h"
#include "kernels/random_testing.h"

namespace rw::gpu {
namespace {

using TT = gguf::TensorType;

using testing::Down;
using testing::Up;

struct IdCase {
  TT type;
  int64_t rows, cols;
  bool fused;  // the up half of a fused gate_up tensor: expert stride 2·rows, rows [rows, 2·rows)
};

class GpuMatMulId : public ::testing::TestWithParam<IdCase> {};

// 4 tokens x K = 2 routed rows over 3 experts: every output element has the bits of gguf::VecDotRef on the
// expert's row, and of the dense RecordMatMul on that expert's matrix alone.
TEST_P(GpuMatMulId, MatchesTheScalarTwinAndTheDenseMatMulOfTheExpertBitForBit) {
  REQUIRE_DEVICE(ctx);
  const IdCase c = GetParam();
  const int64_t X = 3, N = 4, K = 2, stride = c.fused ? 2 * c.rows : c.rows, off = c.fused ? c.rows : 0;
  const size_t rb = gguf::RowBytes(c.type, c.cols);
  std::vector<uint8_t> w(rb * X * stride);
  const std::vector<float> f = kernels::Random(static_cast<size_t>(X * stride * c.cols), 31, 0.5f);
  for (int64_t r = 0; r < X * stride; ++r) gguf::QuantizeRow(c.type, f.data() + r * c.cols, w.data() + r * rb, c.cols);
  const std::vector<float> x = kernels::Random(static_cast<size_t>(N * c.cols), 32);
  const std::vector<int32_t> ids = {2, 0, 1, 2, 0, 0, 2, 1};  // [N][K]
  auto gm = UploadMatrix(*ctx, c.type, w.data(), c.cols, X * stride, rb);
  ASSERT_TRUE(gm.ok()) << gm.error().message;
  Buffer xb = Up(*ctx, x), ib = Up(*ctx, ids);
  auto yb = ctx->Alloc(4 * N * K * c.rows);
  ASSERT_TRUE(yb.ok());
  // Each kernel variant (the quantised types' rows variant; F32 / F16 / BF16 run per element either way).
  // The rows variant of the 32-value block types also with the packed integer dot product (where the device has it).
  const bool dot_too = ctx->has_int_dot() &&
                       (gguf::BlockSize(c.type) == 32 || gguf::BlockSize(c.type) == 256);  // (K-quants: the tile)
  // And the tile over the rows grouped by expert (8 rows over 3 experts: runs of 1 to 3 rows, padded).
  for (const int variant : {0, 1, 2, 3, 4}) {
  if ((variant == 2 || variant == 4) && !dot_too) continue;
  const MatMulKernel kernel = variant == 0 ? MatMulKernel::kPerElement : variant <= 2 ? MatMulKernel::kRows : MatMulKernel::kTile;
  const char* names[5] = {"per element", "rows variant", "rows variant, integer dot product", "expert tile",
                          "expert tile, integer dot product"};
  SCOPED_TRACE(names[variant]);
  ActScratch s;
  s.kernel = kernel;
  s.int_dot = variant == 2 || variant == 4 ? IntDot::kOn : IntDot::kOff;
  ASSERT_TRUE(RecordMatMulId(*ctx, *gm, ExpertRows{c.rows, stride, off}, ib, xb, N, K, N * K, *yb, s).ok());
  const std::vector<float> y = Down(*ctx, *yb, N * K * c.rows);
  const TT at = gguf::VecDotType(c.type);
  std::vector<uint8_t> act(gguf::RowBytes(at, c.cols));
  for (int64_t t = 0; t < N * K; ++t) {
    gguf::QuantizeActivationRow(at, x.data() + (t / K) * c.cols, act.data(), c.cols);
    // The dense product of this expert's matrix on the token's row.
    auto em = UploadMatrix(*ctx, c.type, w.data() + (ids[t] * stride + off) * rb, c.cols, c.rows, rb);
    ASSERT_TRUE(em.ok());
    auto dense = MatMulHost(*ctx, *em, x.data() + (t / K) * c.cols, 1);
    ASSERT_TRUE(dense.ok());
    for (int64_t r = 0; r < c.rows; ++r) {
      const float ref = gguf::VecDotRef(c.type, c.cols, w.data() + (ids[t] * stride + off + r) * rb, act.data());
      const float got = y[t * c.rows + r];
      EXPECT_EQ(0, std::memcmp(&ref, &got, 4)) << gguf::TypeName(c.type) << " t=" << t << " r=" << r;
      EXPECT_EQ(0, std::memcmp(&(*dense)[r], &got, 4)) << "vs the dense matmul, t=" << t << " r=" << r;
    }
  }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Types, GpuMatMulId,
    ::testing::Values(IdCase{TT::kF32, 5, 64, false}, IdCase{TT::kF16, 5, 64, true}, IdCase{TT::kBF16, 5, 64, false},
                      IdCase{TT::kQ8_0, 7, 64, true}, IdCase{TT::kQ4_0, 7, 64, false}, IdCase{TT::kQ4_1, 7, 64, true},
                      IdCase{TT::kQ5_0, 7, 64, false}, IdCase{TT::kQ5_1, 7, 64, true}, IdCase{TT::kQ4_K, 3, 256, true},
                      IdCase{TT::kQ5_K, 3, 256, false}, IdCase{TT::kQ6_K, 3, 256, false},
                      IdCase{TT::kQ6_K, 9, 5120, true}, IdCase{TT::kQ5_0, 11, 1024, false}),
    [](const ::testing::TestParamInfo<IdCase>& i) {
      return std::string(gguf::TypeName(i.param.type)) + (i.param.fused ? "_fused" : "") +
             (i.param.cols > 256 ? "_long" : "");
    });

// Prefill-sized batches: 37 tokens x K = 3 routed rows over 5 experts (runs of up to about 30 rows: several
// tiles an expert, partial tiles, tiles of padding), whole with activation rows of their own (a_div = 1, the
// down projection) and in parts of 2 experts (a lowered buffer range) sharing a token's row (a_div = 3): the tile over
// the rows grouped by expert gives the per-element kernel's bits, for the 32-value and the 256-value block types,
// with the integer dot product too where the device has it. kAuto picks the tile from 4 rows an expert.
TEST(GpuMoe, TheExpertTileGivesThePerElementBits) {
  REQUIRE_DEVICE(ctx);
  const int64_t X = 5, N = 37, K = 3, rows = 70;
  std::vector<int32_t> ids(N * K);
  for (int64_t t = 0; t < N; ++t)
    for (int64_t k = 0; k < K; ++k) ids[t * K + k] = static_cast<int32_t>((t * 7 + k * 2 + (t % 3 == 0 ? 1 : 0)) % X);
  ids[5] = 4;  // expert 4 gets a few rows only
  for (const TT type : {TT::kQ4_1, TT::kQ4_K}) {  // the other types' tiles: GpuMatMulId
    const int64_t cols = gguf::BlockSize(type) == 32 ? 96 : 512;
    const size_t rb = gguf::RowBytes(type, cols);
    std::vector<uint8_t> w(rb * X * rows);
    const std::vector<float> f = kernels::Random(static_cast<size_t>(X * rows * cols), 61, 0.5f);
    for (int64_t r = 0; r < X * rows; ++r) gguf::QuantizeRow(type, f.data() + r * cols, w.data() + r * rb, cols);
    for (const bool parts : {false, true}) {
      const uint32_t a_div = parts ? static_cast<uint32_t>(K) : 1u;
      SCOPED_TRACE(::testing::Message() << gguf::TypeName(type) << (parts ? ", in parts" : "") << ", a_div " << a_div);
      const int64_t n_x = a_div == 1 ? N * K : N;
      const std::vector<float> x = kernels::Random(static_cast<size_t>(n_x * cols), 62);
      if (parts) ctx->LimitForTesting(0, 0, 2 * rows * rb);
      auto gm = UploadMatrix(*ctx, type, w.data(), cols, X * rows, rb, rows);
      ctx->LimitForTesting(0, 0);
      ASSERT_TRUE(gm.ok()) << gm.error().message;
      EXPECT_EQ(gm->parts.size(), parts ? 3u : 1u);
      Buffer xb = Up(*ctx, x), ib = Up(*ctx, ids);
      auto run = [&](MatMulKernel kernel, IntDot dot) {
        auto yb = ctx->Alloc(4 * N * K * rows);
        EXPECT_TRUE(yb.ok());
        ActScratch s;
        s.kernel = kernel;
        s.int_dot = dot;
        EXPECT_TRUE(RecordMatMulId(*ctx, *gm, ExpertRows{rows, rows, 0}, ib, xb, n_x, a_div, N * K, *yb, s).ok());
        return Down(*ctx, *yb, N * K * rows);
      };
      const std::vector<float> ref = run(MatMulKernel::kPerElement, IntDot::kOff);
      const std::vector<float> tile = run(MatMulKernel::kTile, IntDot::kOff);
      EXPECT_EQ(0, std::memcmp(ref.data(), tile.data(), 4 * ref.size())) << "tile";
      EXPECT_EQ(0, std::memcmp(ref.data(), run(MatMulKernel::kAuto, IntDot::kOff).data(), 4 * ref.size())) << "auto";
      if (ctx->has_int_dot() && gguf::BlockSize(type) == 32)
        EXPECT_EQ(0, std::memcmp(ref.data(), run(MatMulKernel::kTile, IntDot::kOn).data(), 4 * ref.size())) << "dot";
      // Against the CPU's scalar twin (a few rows of each output row).
      const TT at = gguf::VecDotType(type);
      std::vector<uint8_t> act(gguf::RowBytes(at, cols));
      for (int64_t t = 0; t < N * K; t += 5) {
        gguf::QuantizeActivationRow(at, x.data() + (t / a_div) * cols, act.data(), cols);
        for (int64_t r = 0; r < rows; r += 13) {
          const float want = gguf::VecDotRef(type, cols, w.data() + (ids[t] * rows + r) * rb, act.data());
          EXPECT_EQ(0, std::memcmp(&want, &tile[t * rows + r], 4)) << "t " << t << " r " << r;
        }
      }
      if (::testing::Test::HasFailure()) return;
    }
  }
}

// The router against kernels::SoftmaxTopK: the same experts in the same order (ties to the lower index, exact
// ties included), weights within rounding of the device's exp.
TEST(GpuMoe, RouterPicksTheCpusExpertsInItsOrderWithItsWeights) {
  REQUIRE_DEVICE(ctx);
  const uint32_t N = 5, X = 16, K = 4;
  std::vector<float> logits = kernels::Random(N * X, 41, 3.0f);
  for (uint32_t e = 0; e < X; ++e) logits[3 * X + e] = (e % 4 == 1) ? 2.0f : -1.0f;  // a row of exact ties
  for (uint32_t e = 0; e < X; ++e) logits[4 * X + e] = (e == 2 || e == 7 || e == 11) ? 5.0f : 0.1f * e;
  Buffer lb = Up(*ctx, logits), sb = Up(*ctx, std::vector<int32_t>(N * K)), wb = Up(*ctx, std::vector<float>(N * K));
  ASSERT_TRUE(RecordMoeRoute(*ctx, lb, N, X, K, sb, wb).ok());
  const std::vector<int32_t> sel = Down<int32_t>(*ctx, sb, N * K);
  const std::vector<float> wt = Down(*ctx, wb, N * K);
  for (uint32_t i = 0; i < N; ++i) {
    std::vector<float> l(logits.begin() + i * X, logits.begin() + (i + 1) * X), w(K);
    std::vector<int32_t> s(K);
    kernels::SoftmaxTopK(l.data(), X, K, s.data(), w.data());
    for (uint32_t k = 0; k < K; ++k) {
      EXPECT_EQ(sel[i * K + k], s[k]) << "token " << i << " k " << k;
      EXPECT_NEAR(wt[i * K + k], w[k], 2e-6f * w[k]) << "token " << i << " k " << k;
    }
  }
  EXPECT_EQ(sel[3 * K], 1);
  EXPECT_EQ(sel[3 * K + 1], 5);
  EXPECT_EQ(sel[4 * K], 2);
  EXPECT_EQ(sel[4 * K + 1], 7);
  EXPECT_EQ(sel[4 * K + 2], 11);
}

// The combine in the CPU's order (model/experts.cc: weighted rows summed in k order; ffn.cc: + shared ·
// kernels::Sigmoid(gate)): the same bits, with and without the gated shared expert.
TEST(GpuMoe, CombineSumsInTheCpusOrderBitForBit) {
  REQUIRE_DEVICE(ctx);
  const uint32_t N = 3, K = 3, E = 40;
  const std::vector<float> ye = kernels::Random(N * K * E, 51), wt = kernels::Random(N * K, 52),
                           sh = kernels::Random(N * E, 53), sg = kernels::Random(N, 54, 4.0f);
  Buffer yb = Up(*ctx, ye), wb = Up(*ctx, wt), shb = Up(*ctx, sh), sgb = Up(*ctx, sg),
         ob = Up(*ctx, std::vector<float>(N * E));
  for (int mode = 0; mode < 2; ++mode) {
    ASSERT_TRUE(RecordMoeCombine(*ctx, yb, wb, N, K, E, mode ? &shb : nullptr, mode ? &sgb : nullptr, ob).ok());
    const std::vector<float> got = Down(*ctx, ob, N * E);
    for (uint32_t i = 0; i < N; ++i)
      for (uint32_t d = 0; d < E; ++d) {
        float o = ye[i * K * E + d] * wt[i * K];
        for (uint32_t k = 1; k < K; ++k) {
          const float p = ye[(i * K + k) * E + d] * wt[i * K + k];
          o = o + p;
        }
        if (mode) {
          const float gs = kernels::Sigmoid(sg[i]);
          const float p = sh[i * E + d] * gs;
          o = o + p;
        }
        EXPECT_EQ(0, std::memcmp(&o, &got[i * E + d], 4)) << "mode " << mode << " token " << i << " d " << d;
      }
  }
}

// gpu::MatMulReuse: products of one input share its quantised rows, and the routed rows grouped by expert serve
// the three expert products. Two dense matrices and two stacked expert tensors (Q8_0, 3 experts, the tile) on the
// same 5 tokens: the same bits as each product on a scratch of its own, with one quantisation and one grouping
// for all four; a reuse asked for rows the scratch does not hold (another offset, another token count)
// quantises them.
TEST(GpuMatMulReuse, SharedInputsAreQuantisedAndGroupedOnceWithTheSameBits) {
  REQUIRE_DEVICE(ctx);
  const TT type = TT::kQ8_0;
  const int64_t cols = 64, R1 = 7, R2 = 5, X = 3, F = 6, N = 5, K = 2;
  const size_t rb = gguf::RowBytes(type, cols);
  auto matrix = [&](int64_t rows, uint32_t seed) {
    std::vector<uint8_t> w(rb * rows);
    const std::vector<float> f = kernels::Random(static_cast<size_t>(rows * cols), seed, 0.5f);
    for (int64_t r = 0; r < rows; ++r) gguf::QuantizeRow(type, f.data() + r * cols, w.data() + r * rb, cols);
    auto m = UploadMatrix(*ctx, type, w.data(), cols, rows, rb);
    REWIND_CHECK(m.ok());
    return std::move(*m);
  };
  const GpuMatrix w1 = matrix(R1, 61), w2 = matrix(R2, 62), e1 = matrix(X * F, 63), e2 = matrix(X * F, 64);
  const std::vector<float> x = kernels::Random(static_cast<size_t>((N + 1) * cols), 65);
  const std::vector<int32_t> ids = {2, 0, 1, 2, 0, 0, 2, 1, 1, 1};  // [N][K]
  Buffer xb = Up(*ctx, x), ib = Up(*ctx, ids);
  const ExpertRows er{F, F, 0};
  auto run = [&](bool reuse, std::vector<float> out[4]) {
    ActScratch own[4], shared;
    shared.kernel = MatMulKernel::kTile;
    for (ActScratch& o : own) o.kernel = MatMulKernel::kTile;
    Buffer y[4] = {Up(*ctx, std::vector<float>(N * R1)), Up(*ctx, std::vector<float>(N * R2)),
                   Up(*ctx, std::vector<float>(N * K * F)), Up(*ctx, std::vector<float>(N * K * F))};
    const uint64_t d0 = ctx->dispatches();
    ActScratch* s = reuse ? &shared : nullptr;
    REWIND_CHECK(RecordMatMul(*ctx, w1, xb, 0, N, y[0], 0, R1, s ? *s : own[0]).ok());
    REWIND_CHECK(RecordMatMul(*ctx, w2, xb, 0, N, y[1], 0, R2, s ? *s : own[1], {reuse, false}).ok());
    REWIND_CHECK(RecordMatMulId(*ctx, e1, er, ib, xb, N, K, N * K, y[2], s ? *s : own[2], {reuse, false}).ok());
    REWIND_CHECK(RecordMatMulId(*ctx, e2, er, ib, xb, N, K, N * K, y[3], s ? *s : own[3], {reuse, reuse}).ok());
    const uint64_t dispatches = ctx->dispatches() - d0;
    out[0] = Down(*ctx, y[0], N * R1);
    out[1] = Down(*ctx, y[1], N * R2);
    out[2] = Down(*ctx, y[2], N * K * F);
    out[3] = Down(*ctx, y[3], N * K * F);
    return dispatches;
  };
  std::vector<float> alone[4], reused[4];
  // Alone: a quantisation and a product each, and a grouping for each expert product (10 dispatches). Reused:
  // one quantisation, one grouping, four products.
  EXPECT_EQ(run(false, alone), 10u);
  EXPECT_EQ(run(true, reused), 6u);
  for (int i = 0; i < 4; ++i) {
    ASSERT_EQ(alone[i].size(), reused[i].size());
    EXPECT_EQ(0, std::memcmp(alone[i].data(), reused[i].data(), 4 * alone[i].size())) << "product " << i;
  }
  // Rows the scratch does not hold: quantised again, whatever the caller says.
  ActScratch s;
  Buffer y = Up(*ctx, std::vector<float>(N * R2));
  ASSERT_TRUE(RecordMatMul(*ctx, w1, xb, 0, N, y, 0, R1, s).ok());
  for (const auto& [off, n] : {std::pair<uint32_t, int64_t>{static_cast<uint32_t>(cols), N}, {0u, N - 1}}) {
    const uint64_t d0 = ctx->dispatches();
    ASSERT_TRUE(RecordMatMul(*ctx, w2, xb, off, n, y, 0, R2, s, {true, false}).ok());
    EXPECT_EQ(ctx->dispatches() - d0, 2u) << "offset " << off << ", " << n << " tokens";
    const std::vector<float> got = Down(*ctx, y, static_cast<size_t>(n * R2));
    auto want = MatMulHost(*ctx, w2, x.data() + off, n, MatMulKernel::kTile);
    ASSERT_TRUE(want.ok());
    EXPECT_EQ(0, std::memcmp(got.data(), want->data(), 4 * got.size())) << "offset " << off << ", " << n << " tokens";
    ASSERT_TRUE(RecordMatMul(*ctx, w1, xb, 0, N, y, 0, R1, s).ok());
  }
}

// The routed experts' down product with SwiGLU computed by its activation conversion: the bits of an
// element-wise SwiGLU first and the plain expert product, per element, rows and tile, and for F32 experts.
TEST(GpuMatMulId, SwiGluInTheActivationsConversionGivesTheSeparateDispatchesBits) {
  REQUIRE_DEVICE(ctx);
  const int64_t X = 3, NK = 8, rows = 16, cols = 256;
  const std::vector<int32_t> ids = {2, 0, 1, 2, 0, 0, 2, 1};
  Buffer ib = Up(*ctx, ids);
  for (const TT type : {TT::kQ8_0, TT::kQ5_1, TT::kQ4_K, TT::kF32}) {
    const size_t rb = gguf::RowBytes(type, cols);
    std::vector<uint8_t> w(rb * X * rows);
    const std::vector<float> f = kernels::Random(static_cast<size_t>(X * rows * cols), 51, 0.5f);
    for (int64_t r = 0; r < X * rows; ++r) gguf::QuantizeRow(type, f.data() + r * cols, w.data() + r * rb, cols);
    auto gm = UploadMatrix(*ctx, type, w.data(), cols, X * rows, rb);
    ASSERT_TRUE(gm.ok()) << gm.error().message;
    const std::vector<float> g = kernels::Random(static_cast<size_t>(NK * cols), 52, 3.0f),
                             u = kernels::Random(static_cast<size_t>(NK * cols), 53);
    for (const MatMulKernel k : {MatMulKernel::kPerElement, MatMulKernel::kRows, MatMulKernel::kTile}) {
      Buffer g1 = Up(*ctx, g), g2 = Up(*ctx, g), ub = Up(*ctx, u);
      auto y1 = ctx->Alloc(4 * NK * rows), y2 = ctx->Alloc(4 * NK * rows);
      ASSERT_TRUE(y1.ok() && y2.ok());
      ActScratch s;
      s.kernel = k;
      ASSERT_TRUE(RecordEltwise(*ctx, g1, ub, 1, 1, NK * cols).ok());  // g1 = silu(g1)·u
      const ExpertRows er{rows, rows, 0};
      ASSERT_TRUE(RecordMatMulId(*ctx, *gm, er, ib, g1, NK, 1, NK, *y1, s).ok());
      ASSERT_TRUE(RecordSwiGluMatMulId(*ctx, *gm, er, ib, g2, ub, NK, 1, NK, *y2, s).ok());
      const std::vector<float> a = Down(*ctx, *y1, NK * rows), b = Down(*ctx, *y2, NK * rows);
      EXPECT_EQ(0, std::memcmp(a.data(), b.data(), 4 * a.size())) << gguf::TypeName(type) << " kernel " << static_cast<int>(k);
      EXPECT_NE(a[0], 0.0f);
    }
  }
}

}  // namespace
}  // namespace rw::gpu
