// The GPU layer kernels (RoPE, L2 norm, the GDN short convolution and delta rule) against their CPU twins on
// whatever Vulkan device the machine has (lavapipe in CI); each test skips with a message without one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "gpu/device.h"
#include "gpu/gpu_testing.h"
#include "gpu/ops.h"
#include "gpu/seq_ops.h"
#include "kernels/activation.h"
#include "kernels/conv.h"
#include "kernels/gdn.h"
#include "kernels/gdn_split.h"
#include "kernels/norm.h"
#include "kernels/random_testing.h"
#include "kernels/rope.h"

namespace rw::gpu {
namespace {

using testing::Down;
using testing::Up;

TEST(GpuLayerKernels, RopeWithTheHostTableMatchesKernelsRopeApplyBitForBit) {
  REQUIRE_DEVICE(ctx);
  const int32_t tokens = 3, heads = 4, D = 32, n_rot = 16;
  kernels::RopeParams rp;
  rp.n_rot = n_rot;
  rp.freq_base = 1e6f;
  rp.imrope = true;
  rp.sections = {3, 3, 2, 0};
  std::vector<float> table(tokens * n_rot), x = kernels::Random(tokens * heads * D, 5), want = x;
  for (int32_t t = 0; t < tokens; ++t) {
    kernels::RopeCache(rp, 100 + 7 * t, table.data() + t * n_rot);
    for (int32_t h = 0; h < heads; ++h) kernels::RopeApply(table.data() + t * n_rot, n_rot, want.data() + (t * heads + h) * D);
  }
  Buffer xb = Up(*ctx, x), tb = Up(*ctx, table);
  auto p = ctx->GetPipeline("rope");
  ASSERT_TRUE(p.ok());
  struct { uint32_t total, heads, row_stride, head_stride, x_off, n_rot; } pc{tokens * heads, heads, heads * D, D, 0, n_rot};
  ctx->Dispatch(**p, {{&xb}, {&tb}}, &pc, sizeof(pc), Groups(pc.total));
  EXPECT_EQ(Down(*ctx, xb, x.size()), want);
}

TEST(GpuLayerKernels, L2NormMatchesKernelsL2NormBitForBit) {
  REQUIRE_DEVICE(ctx);
  const uint32_t rows = 6, per = 2, S = 16, C = 80;  // 3 tokens x 2 heads of 16, rows C apart
  std::vector<float> x = kernels::Random(3 * C, 9), want = x;
  for (uint32_t r = 0; r < rows; ++r) {
    float* v = want.data() + (r / per) * C + (r % per) * S + 8;
    kernels::L2Norm(v, S, 1e-6f, v);
  }
  Buffer xb = Up(*ctx, x);
  auto p = ctx->GetPipeline("l2_norm");
  ASSERT_TRUE(p.ok());
  struct { uint32_t rows, n, per, outer, inner, x_off; float eps; } pc{rows, S, per, C, S, 8, 1e-6f};
  ctx->Dispatch(**p, {{&xb}}, &pc, sizeof(pc), Groups(rows));
  EXPECT_EQ(Down(*ctx, xb, x.size()), want);
}

// Two sequences through the conv window and the delta rule token by token, against kernels::CausalConvRunPortable
// + SiLU and kernels::GdnHeadStepPortable (the CPU sums with FMA lanes and its own exp: within rounding). State
// rows of 8 (one workgroup across heads and sequences) and 128 values live in shared memory during a dispatch,
// rows of 160 in the state buffer (gdn_delta.comp's kMaxS).
class GpuGdnRows : public ::testing::TestWithParam<int32_t> {};
INSTANTIATE_TEST_SUITE_P(StateRows, GpuGdnRows, ::testing::Values(8, 128, 160));

TEST_P(GpuGdnRows, GdnConvAndDeltaRuleMatchTheCpuStepsWithinRounding) {
  REQUIRE_DEVICE(ctx);
  const int32_t S = GetParam(), Hv = 2, Hk = 1, Kd = Hk * S, C = 2 * Kd + Hv * S, Kc = 4, T0 = 3, T1 = 2,
                N = T0 + T1;
  const std::vector<float> x = kernels::Random(N * C, 1), w = kernels::Random(C * Kc, 2, 0.5f);
  std::vector<float> st = kernels::Random(2 * C * (Kc - 1), 3), beta(N * Hv), g(N * Hv);
  for (int32_t i = 0; i < N * Hv; ++i) {
    beta[i] = 0.3f + 0.05f * i;
    g[i] = -0.1f * (1 + i % 3);
  }
  std::vector<float> M = kernels::Random(2 * Hv * S * S, 4, 0.2f);
  const std::vector<int32_t> tab = {0, T0, 0, 0, T0, T1, 1, 0};
  Buffer xb = Up(*ctx, x), wb = Up(*ctx, w), sb = Up(*ctx, st), ub = Up(*ctx, std::vector<float>(N * C)),
         tb = Up(*ctx, tab), bb = Up(*ctx, beta), gb = Up(*ctx, g), mb = Up(*ctx, M),
         ob = Up(*ctx, std::vector<float>(N * Hv * S));
  RecordGdnConv(*ctx, xb, wb, sb, ub, tb, 2, T0, C, Kc, C);
  ASSERT_TRUE(ctx->Submit().ok());
  std::vector<float> u = Down(*ctx, ub, N * C);
  // The conv output is the delta rule's input; use the GPU's u for both sides so the step is compared alone.
  RecordGdnDelta(*ctx, ub, bb, gb, mb, ob, tb, 2, T0, GdnDeltaShape{Hv, S, C, Kd, 1, Hk});
  const std::vector<float> o = Down(*ctx, ob, N * Hv * S), m_gpu = Down(*ctx, mb, M.size()),
                           s_gpu = Down(*ctx, sb, st.size());
  // CPU: conv per sequence, then SiLU.
  std::vector<float> u_cpu(N * C), st_cpu = st;
  for (int32_t s = 0; s < 2; ++s) {
    const int32_t row0 = s == 0 ? 0 : T0, n = s == 0 ? T0 : T1;
    kernels::CausalConvRunPortable(st_cpu.data() + s * C * (Kc - 1), w.data(), x.data() + row0 * C, C, n, 0, C, Kc,
                                   u_cpu.data() + row0 * C, C);
  }
  for (float& v : u_cpu) v = kernels::Silu(v);
  for (size_t i = 0; i < u.size(); ++i) ASSERT_NEAR(u[i], u_cpu[i], 1e-5f * (1 + std::fabs(u_cpu[i]))) << i;
  EXPECT_EQ(s_gpu, st_cpu) << "the conv window moves by the same copies";
  std::vector<float> o_cpu(N * Hv * S), m_cpu = M;
  for (int32_t s = 0; s < 2; ++s) {
    const int32_t row0 = s == 0 ? 0 : T0, n = s == 0 ? T0 : T1;
    for (int32_t t = 0; t < n; ++t)
      for (int32_t h = 0; h < Hv; ++h) {
        const float* row = u.data() + (row0 + t) * C;
        kernels::GdnHeadStepPortable(m_cpu.data() + (s * Hv + h) * S * S, row, row + Kd, row + 2 * Kd + h * S,
                                     beta[(row0 + t) * Hv + h], g[(row0 + t) * Hv + h], S,
                                     o_cpu.data() + (row0 + t) * Hv * S + h * S);
      }
  }
  // Sums of S products (keys not normalised here): the rounding grows with S.
  const float tol = 1e-5f * static_cast<float>(std::max(1, S / 32));
  for (size_t i = 0; i < o.size(); ++i) EXPECT_NEAR(o[i], o_cpu[i], tol * (1 + std::fabs(o_cpu[i]))) << i;
  for (size_t i = 0; i < M.size(); ++i) EXPECT_NEAR(m_gpu[i], m_cpu[i], tol * (1 + std::fabs(m_cpu[i]))) << i;
}

// qwen3next's fused projections: gdn_split.comp makes kernels::SplitQkvzRow's and SplitBaRow's copies.
TEST(GpuLayerKernels, FusedQwen3NextProjectionsSplitLikeTheCpu) {
  REQUIRE_DEVICE(ctx);
  const uint32_t N = 3, S = 4, Hk = 2, r = 3, Kd = Hk * S, Vd = Hk * r * S, C = 2 * Kd + Vd, W = 2 * Kd + 2 * Vd,
                 Hv = Hk * r;
  const std::vector<float> in = kernels::Random(N * W, 101), ba = kernels::Random(N * 2 * Hv, 102);
  std::vector<float> qkv(N * C), z(N * Vd), b(N * Hv), a(N * Hv);
  for (uint32_t i = 0; i < N; ++i) {
    kernels::SplitQkvzRow(in.data() + i * W, S, Hk, r, qkv.data() + i * C, z.data() + i * Vd);
    kernels::SplitBaRow(ba.data() + i * 2 * Hv, Hk, r, b.data() + i * Hv, a.data() + i * Hv);
  }
  Buffer ib = Up(*ctx, in), bab = Up(*ctx, ba), qb = Up(*ctx, std::vector<float>(N * C)),
         zb = Up(*ctx, std::vector<float>(N * Vd)), bb = Up(*ctx, std::vector<float>(N * Hv)),
         ab = Up(*ctx, std::vector<float>(N * Hv));
  auto p = ctx->GetPipeline("gdn_split");
  ASSERT_TRUE(p.ok());
  struct { uint32_t N, S, Hk, r, mode; } pc{N, S, Hk, r, 0};
  ctx->Dispatch(**p, {{&ib}, {&qb}, {&zb}}, &pc, sizeof(pc), Groups(N * W));
  pc.mode = 1;
  ctx->Dispatch(**p, {{&bab}, {&bb}, {&ab}}, &pc, sizeof(pc), Groups(N * 2 * Hv));
  EXPECT_EQ(Down(*ctx, qb, qkv.size()), qkv);
  EXPECT_EQ(Down(*ctx, zb, z.size()), z);
  EXPECT_EQ(Down(*ctx, bb, b.size()), b);
  EXPECT_EQ(Down(*ctx, ab, a.size()), a);
}

}  // namespace
}  // namespace rw::gpu
