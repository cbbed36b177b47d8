// Device limits (docs/gpu.md "Exactness"): dispatches over the workgroup-count limit fold into the next
// dimension, and kernels whose loops run along a sequence split into several dispatches where the driver limits
// an invocation's loop iterations (lavapipe ends loops silently after 65,535 back-edges). The splits and folds
// must not change a bit (tested with the limits lowered), and long runs must be right on the real limits (tested
// against CPU twins past 65,535 iterations). Each test skips with a message without a Vulkan device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "gguf/quants.h"
#include "gpu/device.h"
#include "gpu/gpu_testing.h"
#include "gpu/ops.h"
#include "gpu/seq_ops.h"
#include "kernels/f16.h"
#include "kernels/gdn.h"
#include "kernels/random_testing.h"

namespace rw::gpu {
namespace {

using testing::Down;
using testing::Up;
constexpr gguf::TensorType kF16 = gguf::TensorType::kF16, kF32 = gguf::TensorType::kF32;

// Lowers the context's limits for one scope.
struct Limited {
  Limited(Context& c, uint32_t groups, uint64_t budget) : c_(c) { c_.LimitForTesting(groups, budget); }
  ~Limited() { c_.LimitForTesting(0, 0); }
  Context& c_;
};

TEST(GpuLimits, FoldedDispatchesGiveTheSameBits) {
  REQUIRE_DEVICE(ctx);
  // RMSNorm over 1,000 rows (16 groups of 64) and a Q8_0 matmul over 40 tokens, with at most 7 groups per
  // dimension: x folds into y, the matmul's token rows into z.
  const uint32_t rows = 1000, n = 32;
  const std::vector<float> x = kernels::Random(rows * n, 61);
  Buffer xb = Up(*ctx, x), ob = Up(*ctx, std::vector<float>(x.size()));
  const int64_t M = 9, K = 64, T = 40;
  std::vector<uint8_t> w(gguf::RowBytes(gguf::TensorType::kQ8_0, K) * M);
  const std::vector<float> wf = kernels::Random(M * K, 62);
  for (int64_t r = 0; r < M; ++r)
    gguf::QuantizeRow(gguf::TensorType::kQ8_0, wf.data() + r * K, w.data() + r * (w.size() / M), K);
  auto gm = UploadMatrix(*ctx, gguf::TensorType::kQ8_0, w.data(), K, M, w.size() / M);
  ASSERT_TRUE(gm.ok());
  const std::vector<float> a = kernels::Random(T * K, 63);
  std::vector<float> norm[2], mm[2];
  for (int lim = 0; lim < 2; ++lim) {
    Limited l(*ctx, lim ? 7 : 0, 0);
    ASSERT_TRUE(RecordRmsNorm(*ctx, xb, 0, n, rows, n, nullptr, 1e-6f, ob, 0, n).ok());
    norm[lim] = Down(*ctx, ob, x.size());
    auto y = MatMulHost(*ctx, *gm, a.data(), T);
    ASSERT_TRUE(y.ok());
    mm[lim] = *y;
  }
  EXPECT_EQ(0, std::memcmp(norm[0].data(), norm[1].data(), 4 * norm[0].size()));
  EXPECT_EQ(0, std::memcmp(mm[0].data(), mm[1].data(), 4 * mm[0].size()));
  std::vector<float> nz(norm[0].size(), 0.0f);
  EXPECT_NE(norm[1], nz) << "every folded row was written";
}

// A weight over the device's storage buffer range (lavapipe: 128 MiB, less than a real vocabulary's LM head) is
// uploaded in parts of whole row groups; the dense and the expert-indexed products give the unsplit bits.
TEST(GpuLimits, WeightsOverTheBufferRangeSplitIntoPartsWithTheSameBits) {
  REQUIRE_DEVICE(ctx);
  using TT = gguf::TensorType;
  const int64_t X = 3, F = 5, K = 64, N = 4;  // 3 experts of 5 rows; a dense view of all 15 rows
  const uint64_t rb = gguf::RowBytes(TT::kQ8_0, K);
  std::vector<uint8_t> w(rb * X * F);
  const std::vector<float> wf = kernels::Random(X * F * K, 64);
  for (int64_t r = 0; r < X * F; ++r) gguf::QuantizeRow(TT::kQ8_0, wf.data() + r * K, w.data() + r * rb, K);
  const std::vector<float> x = kernels::Random(N * K, 65);
  const std::vector<int32_t> ids = {2, 0, 1, 2, 0, 0, 2, 1};  // [N][2]
  Buffer xb = Up(*ctx, x), ib = Up(*ctx, ids);
  std::vector<float> dense[2], routed[2];
  for (int lim = 0; lim < 2; ++lim) {
    ctx->LimitForTesting(0, 0, lim ? 2 * rb : 0);  // dense: 2 rows a part; experts: the group is over it
    auto gd = UploadMatrix(*ctx, TT::kQ8_0, w.data(), K, X * F, rb);
    ctx->LimitForTesting(0, 0, lim ? F * rb : 0);  // experts: one a part
    auto ge = UploadMatrix(*ctx, TT::kQ8_0, w.data(), K, X * F, rb, F);
    ctx->LimitForTesting(0, 0, 0);
    ASSERT_TRUE(gd.ok() && ge.ok());
    EXPECT_EQ(gd->parts.size(), lim ? 8u : 1u);
    EXPECT_EQ(ge->parts.size(), lim ? 3u : 1u);
    auto y = MatMulHost(*ctx, *gd, x.data(), N);
    ASSERT_TRUE(y.ok());
    dense[lim] = *y;
    auto yb = ctx->Alloc(4 * N * 2 * F);
    ASSERT_TRUE(yb.ok());
    ActScratch s;
    ASSERT_TRUE(RecordMatMulId(*ctx, *ge, ExpertRows{F, F, 0}, ib, xb, N, 2, N * 2, *yb, s).ok());
    routed[lim] = Down(*ctx, *yb, N * 2 * F);
  }
  EXPECT_EQ(0, std::memcmp(dense[0].data(), dense[1].data(), 4 * dense[0].size()));
  EXPECT_EQ(0, std::memcmp(routed[0].data(), routed[1].data(), 4 * routed[0].size()));
  ctx->LimitForTesting(0, 0, F * rb - 1);
  auto too_big = UploadMatrix(*ctx, TT::kQ8_0, w.data(), K, X * F, rb, F);
  ctx->LimitForTesting(0, 0, 0);
  EXPECT_FALSE(too_big.ok()) << "an expert larger than the buffer range is a clear error";
}

// Two sequences of 23 and 40 tokens through the conv window and the delta rule, in one dispatch each and split
// every 1 (delta) and 3 (conv) tokens: the same outputs and states, bit for bit.
TEST(GpuLimits, GdnSplitsAtTokenBoundariesGiveTheSameBits) {
  REQUIRE_DEVICE(ctx);
  const uint32_t S = 8, Hv = 2, Hk = 1, Kd = Hk * S, C = 2 * Kd + Hv * S, Kc = 4, T0 = 23, T1 = 40, N = T0 + T1;
  const std::vector<float> x = kernels::Random(N * C, 71), w = kernels::Random(C * Kc, 72, 0.5f);
  std::vector<float> beta(N * Hv), g(N * Hv);
  for (uint32_t i = 0; i < N * Hv; ++i) {
    beta[i] = 0.2f + 0.01f * static_cast<float>(i % 17);
    g[i] = -0.05f * static_cast<float>(1 + i % 3);
  }
  const std::vector<int32_t> tab = {0, T0, 0, 0, T0, T1, 1, 0};
  std::vector<float> out[2], conv[2], delta[2];
  for (int lim = 0; lim < 2; ++lim) {
    Limited l(*ctx, 0, lim ? 40 : 0);  // conv: 11 iterations per token; delta: 20, and 16 per dispatch
    Buffer xb = Up(*ctx, x), wb = Up(*ctx, w), sb = Up(*ctx, std::vector<float>(2 * C * (Kc - 1))),
           ub = Up(*ctx, std::vector<float>(N * C)), tb = Up(*ctx, tab), bb = Up(*ctx, beta), gb = Up(*ctx, g),
           mb = Up(*ctx, std::vector<float>(2 * Hv * S * S)), ob = Up(*ctx, std::vector<float>(N * Hv * S));
    RecordGdnConv(*ctx, xb, wb, sb, ub, tb, 2, T1, C, Kc, C);
    RecordGdnDelta(*ctx, ub, bb, gb, mb, ob, tb, 2, T1, GdnDeltaShape{Hv, S, C, Kd, 1, Hk});
    out[lim] = Down(*ctx, ob, N * Hv * S);
    conv[lim] = Down(*ctx, sb, 2 * C * (Kc - 1));
    delta[lim] = Down(*ctx, mb, 2 * Hv * S * S);
  }
  EXPECT_EQ(0, std::memcmp(out[0].data(), out[1].data(), 4 * out[0].size()));
  EXPECT_EQ(0, std::memcmp(conv[0].data(), conv[1].data(), 4 * conv[0].size()));
  EXPECT_EQ(0, std::memcmp(delta[0].data(), delta[1].data(), 4 * delta[0].size()));
}

struct AttnCase {
  std::vector<float> q, k, v;
  std::vector<int32_t> rows, pages;  // pages: one row per page, the identity (the pool is k / v as they are)
  uint32_t N, Hq, Hkv, D, max_pos;
};

AttnCase MakeAttn(uint32_t D, std::vector<int32_t> positions) {
  AttnCase a;
  a.N = static_cast<uint32_t>(positions.size());
  a.Hq = 2;
  a.Hkv = 1;
  a.D = D;
  a.max_pos = 0;
  for (int32_t p : positions) {
    a.rows.insert(a.rows.end(), {0, p});
    a.max_pos = std::max(a.max_pos, static_cast<uint32_t>(p));
  }
  for (uint32_t p = 0; p <= a.max_pos; ++p) a.pages.push_back(static_cast<int32_t>(p));
  a.q = kernels::Random(a.N * a.Hq * D, 81);
  a.k = kernels::Random((a.max_pos + 1) * a.Hkv * D, 82);
  a.v = kernels::Random((a.max_pos + 1) * a.Hkv * D, 83);
  return a;
}

std::vector<float> RunAttn(Context& ctx, const AttnCase& a) {
  Buffer qb = Up(ctx, a.q), kb = Up(ctx, a.k), vb = Up(ctx, a.v), rb = Up(ctx, a.rows), pb = Up(ctx, a.pages),
         ob = Up(ctx, std::vector<float>(a.q.size())), ml;
  const AttentionShape sh{a.N, a.Hq, a.Hkv, a.D, 1.0f / std::sqrt(static_cast<float>(a.D)), 1};
  EXPECT_TRUE(RecordAttention(ctx, qb, kb, vb, ob, rb, pb, a.max_pos, sh, ml).ok());
  return Down(ctx, ob, a.q.size());
}

// Rows at positions 0..300 (5 blocks of 64 keys), in one dispatch and one block per dispatch: the same bits.
TEST(GpuLimits, AttentionSplitAtFixedKeyBlocksGivesTheSameBits) {
  REQUIRE_DEVICE(ctx);
  const uint32_t D = 8;
  ASSERT_EQ(AttentionBlock(D), 64u);
  const AttnCase a = MakeAttn(D, {0, 5, 63, 64, 65, 200, 300});
  const std::vector<float> one = RunAttn(*ctx, a);
  std::vector<float> split;
  {
    Limited l(*ctx, 0, 2000);  // one block of 64 keys per dispatch (1,880 iterations)
    split = RunAttn(*ctx, a);
  }
  EXPECT_EQ(0, std::memcmp(one.data(), split.data(), 4 * one.size()));
}

// On the device's real limits: attention over 5,000 keys (135,000 loop iterations for one invocation unsplit)
// and the delta rule over 9,000 tokens (90,000) against the CPU.
// Attention through page lists: three sequences (3,000, 1,300 and 700 keys) whose 16-row pages lie interleaved and
// out of order in one pool, query rows at positions mid-block (a chunk and decode rows), f32 and f16 pages, GQA
// 1/2/4. Each is the bits of the same attention over the sequence's rows laid out contiguously (the rows kv_gather
// used to copy, f16 widened on the host), and near a double-precision twin.
TEST(GpuLimits, AttentionThroughScatteredPagesMatchesContiguousRows) {
  REQUIRE_DEVICE(ctx);
  const uint32_t D = 8, Hq = 4, PS = 16;
  const std::vector<int32_t> ctx_len = {3000, 1300, 700};
  const std::vector<std::vector<int32_t>> queries = {{1234, 1235, 1236, 1237, 1238, 2999}, {1299, 17}, {0, 699}};
  // Pool pages: every sequence's pages, interleaved, then shuffled (a fixed permutation), plus unused pages.
  std::vector<std::vector<int32_t>> seq_pages(ctx_len.size());
  uint32_t n_pool = 0;
  for (size_t s = 0; s < ctx_len.size(); ++s) n_pool += (ctx_len[s] + PS - 1) / PS;
  n_pool += 5;
  std::vector<int32_t> perm(n_pool);
  for (uint32_t i = 0; i < n_pool; ++i) perm[i] = static_cast<int32_t>((i * 97u + 13u) % n_pool);  // a permutation: checked
  {
    std::vector<bool> seen(n_pool, false);
    for (int32_t p : perm) seen[p] = true;
    for (bool b : seen) ASSERT_TRUE(b) << "the page permutation must cover the pool";
  }
  for (uint32_t i = 0, next = 0; next < n_pool - 5; ++i)
    for (size_t s = 0; s < ctx_len.size(); ++s)
      if (seq_pages[s].size() * PS < static_cast<size_t>(ctx_len[s])) seq_pages[s].push_back(perm[next++]);
  for (const uint32_t Hkv : {4u, 2u, 1u}) {
    for (const bool f16 : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "Hkv " << Hkv << (f16 ? " f16" : " f32"));
      const uint32_t KW = Hkv * D;
      std::vector<float> kpool = kernels::Random(n_pool * PS * KW, 101 + Hkv), vpool = kernels::Random(n_pool * PS * KW, 201 + Hkv);
      if (f16)
        for (std::vector<float>* pool : {&kpool, &vpool})
          for (float& x : *pool) x = kernels::HalfToFloat(kernels::FloatToHalf(x));  // the values the pages hold
      // The paged layout; the contiguous one (sequence s's rows at kv_base(s) + p, one row per "page").
      std::vector<int32_t> rows, pages, crows, cpages;
      std::vector<float> kc, vc;
      uint32_t N = 0, max_pos = 0;
      for (size_t s = 0; s < ctx_len.size(); ++s) {
        const int32_t off = static_cast<int32_t>(pages.size()), coff = static_cast<int32_t>(cpages.size());
        pages.insert(pages.end(), seq_pages[s].begin(), seq_pages[s].end());
        for (int32_t p = 0; p < ctx_len[s]; ++p) {
          const size_t src = (static_cast<size_t>(seq_pages[s][p / PS]) * PS + p % PS) * KW;
          cpages.push_back(static_cast<int32_t>(kc.size() / KW));
          kc.insert(kc.end(), kpool.begin() + src, kpool.begin() + src + KW);
          vc.insert(vc.end(), vpool.begin() + src, vpool.begin() + src + KW);
        }
        for (int32_t pos : queries[s]) {
          rows.insert(rows.end(), {off, pos});
          crows.insert(crows.end(), {coff, pos});
          max_pos = std::max(max_pos, static_cast<uint32_t>(pos));
          ++N;
        }
      }
      Buffer kb, vb;
      if (f16) {
        std::vector<uint32_t> kh(kpool.size() / 2), vh(vpool.size() / 2);
        for (size_t e = 0; e < kpool.size(); ++e) {
          kh[e / 2] |= static_cast<uint32_t>(kernels::FloatToHalf(kpool[e])) << (16 * (e % 2));
          vh[e / 2] |= static_cast<uint32_t>(kernels::FloatToHalf(vpool[e])) << (16 * (e % 2));
        }
        kb = Up(*ctx, kh);
        vb = Up(*ctx, vh);
      } else {
        kb = Up(*ctx, kpool);
        vb = Up(*ctx, vpool);
      }
      const std::vector<float> q = kernels::Random(N * Hq * D, 303);
      const float scale = 1.0f / std::sqrt(static_cast<float>(D));
      Buffer qb = Up(*ctx, q), rb = Up(*ctx, rows), pb = Up(*ctx, pages), ob = Up(*ctx, std::vector<float>(q.size())),
             ml, kcb = Up(*ctx, kc), vcb = Up(*ctx, vc), crb = Up(*ctx, crows), cpb = Up(*ctx, cpages),
             cob = Up(*ctx, std::vector<float>(q.size())), cml;
      ASSERT_TRUE(RecordAttention(*ctx, qb, kb, vb, ob, rb, pb, max_pos, AttentionShape{N, Hq, Hkv, D, scale, PS, f16 ? kF16 : kF32, f16 ? kF16 : kF32},
                                  ml).ok());
      ASSERT_TRUE(RecordAttention(*ctx, qb, kcb, vcb, cob, crb, cpb, max_pos,
                                  AttentionShape{N, Hq, Hkv, D, scale, 1}, cml).ok());
      const std::vector<float> o = Down(*ctx, ob, q.size()), co = Down(*ctx, cob, q.size());
      EXPECT_EQ(0, std::memcmp(o.data(), co.data(), 4 * o.size()));
      for (uint32_t i = 0; i < N; ++i)
        for (uint32_t h = 0; h < Hq; ++h) {
          const uint32_t off = static_cast<uint32_t>(crows[2 * i]), pos = static_cast<uint32_t>(crows[2 * i + 1]);
          const uint32_t kvh = h / (Hq / Hkv);
          std::vector<double> sc(pos + 1);
          double mx = -1e300, den = 0.0;
          for (uint32_t p = 0; p <= pos; ++p) {
            double t = 0.0;
            for (uint32_t d = 0; d < D; ++d) t += static_cast<double>(q[(i * Hq + h) * D + d]) * kc[(off + p) * KW + kvh * D + d];
            sc[p] = t * scale;
            mx = std::max(mx, sc[p]);
          }
          std::vector<double> acc(D, 0.0);
          for (uint32_t p = 0; p <= pos; ++p) {
            const double w = std::exp(sc[p] - mx);
            den += w;
            for (uint32_t d = 0; d < D; ++d) acc[d] += w * vc[(off + p) * KW + kvh * D + d];
          }
          for (uint32_t d = 0; d < D; ++d)
            ASSERT_NEAR(o[(i * Hq + h) * D + d], acc[d] / den, 1e-5) << "row " << i << " head " << h << " d " << d;
        }
    }
  }
}

TEST(GpuLimits, LongRunsPastLavapipesLoopLimitMatchTheCpu) {
  REQUIRE_DEVICE(ctx);
  const uint32_t D = 8;
  const AttnCase a = MakeAttn(D, {4999, 70});
  const std::vector<float> o = RunAttn(*ctx, a);
  for (uint32_t i = 0; i < a.N; ++i)
    for (uint32_t h = 0; h < a.Hq; ++h) {
      const float* q = a.q.data() + (i * a.Hq + h) * D;
      const uint32_t pos = static_cast<uint32_t>(a.rows[2 * i + 1]);
      std::vector<double> s(pos + 1);
      double mx = -1e300, den = 0.0;
      for (uint32_t p = 0; p <= pos; ++p) {
        float sc = 0.0f;
        for (uint32_t d = 0; d < D; ++d) sc += q[d] * a.k[p * D + d];
        s[p] = sc / std::sqrt(static_cast<double>(D));
        mx = std::max(mx, s[p]);
      }
      std::vector<double> acc(D, 0.0);
      for (uint32_t p = 0; p <= pos; ++p) {
        const double w = std::exp(s[p] - mx);
        den += w;
        for (uint32_t d = 0; d < D; ++d) acc[d] += w * a.v[p * D + d];
      }
      for (uint32_t d = 0; d < D; ++d)
        EXPECT_NEAR(o[(i * a.Hq + h) * D + d], acc[d] / den, 1e-5) << "row " << i << " head " << h << " d " << d;
    }
  // Delta rule: one sequence of 9,000 tokens, S = 4.
  const uint32_t S = 4, C = 3 * S, T = 9000;
  std::vector<float> u = kernels::Random(T * C, 91), beta(T), g(T);
  for (uint32_t t = 0; t < T; ++t) {
    float n = 0.0f;
    for (uint32_t j = 0; j < S; ++j) n += u[t * C + S + j] * u[t * C + S + j];
    for (uint32_t j = 0; j < S; ++j) u[t * C + S + j] /= std::sqrt(n);  // a unit key keeps the state bounded
    beta[t] = 0.5f;
    g[t] = -0.02f;
  }
  const std::vector<int32_t> tab = {0, static_cast<int32_t>(T), 0, 0};
  Buffer ub = Up(*ctx, u), bb = Up(*ctx, beta), gb = Up(*ctx, g), mb = Up(*ctx, std::vector<float>(S * S)),
         ob = Up(*ctx, std::vector<float>(T * S)), tb = Up(*ctx, tab);
  RecordGdnDelta(*ctx, ub, bb, gb, mb, ob, tb, 1, T, GdnDeltaShape{1, S, C, S, 1, 1});
  const std::vector<float> out = Down(*ctx, ob, T * S);
  std::vector<float> M(S * S, 0.0f), want(S);
  for (uint32_t t = 0; t < T; ++t) {
    const float* row = u.data() + t * C;
    kernels::GdnHeadStepPortable(M.data(), row, row + S, row + 2 * S, beta[t], g[t], S, want.data());
    if (t == T - 1 || t % 1000 == 0)
      for (uint32_t j = 0; j < S; ++j)
        EXPECT_NEAR(out[t * S + j], want[j], 1e-4f * (1.0f + std::fabs(want[j]))) << "token " << t << " j " << j;
  }
}

}  // namespace
}  // namespace rw::gpu
