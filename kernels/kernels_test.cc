// Fast kernels against their scalar twins (kernels/ref), sizes 0..2N with misaligned pointers.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "base/cpu_features_testing.h"
#include "kernels/activation.h"
#include "kernels/attention.h"
#include "kernels/conv.h"
#include "kernels/dot.h"
#include "kernels/exp_approx.h"
#include "kernels/f16.h"
#include "kernels/gdn.h"
#include "kernels/matmul.h"
#include "kernels/norm.h"
#include "kernels/random_testing.h"
#include "kernels/ref/kernels_ref.h"
#include "kernels/rope.h"
#include "kernels/thread_pool.h"

namespace rw::kernels {
namespace {

TEST(Dot, AvxAndPortableGiveIdenticalBitsAndMatchDoubleReference) {
  REWIND_SKIP_WITHOUT_AVX2();
  auto a = Random(200, 1), b = Random(200, 2);
  for (int off = 0; off < 3; ++off) {
    for (int64_t n = 0; n <= 160; ++n) {
      const float fast = DotF32(a.data() + off, b.data() + off, n);
      const float port = DotF32Portable(a.data() + off, b.data() + off, n);
      EXPECT_EQ(std::bit_cast<uint32_t>(fast), std::bit_cast<uint32_t>(port)) << "n=" << n;
      EXPECT_NEAR(fast, ref::Dot(a.data() + off, b.data() + off, n), 1e-4 * (1 + std::sqrt(n)));
    }
  }
}

TEST(MatMul, F32MatchesReferenceForAllShapes) {
  ThreadPool pool(2);
  for (int64_t K : {1, 7, 32, 33, 100}) {
    for (int64_t R : {1, 5, 17}) {
      auto w = Random(R * K, 3), x = Random(3 * K, 4);
      Matrix m{gguf::TensorType::kF32, reinterpret_cast<const uint8_t*>(w.data()), K, R, uint64_t(K) * 4};
      std::vector<float> y(3 * R), yr(3 * R);
      MatMul(m, x.data(), 3, y.data(), &pool);
      ref::MatMul(m, x.data(), 3, yr.data());
      for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], yr[i], 1e-4 * std::sqrt(K));
    }
  }
}

TEST(RmsNorm, MatchesDefinitionWithWeight) {
  for (int64_t n : {1, 2, 31, 256}) {
    auto x = Random(n, 5), w = Random(n, 6);
    std::vector<float> y(n);
    RmsNorm(x.data(), w.data(), n, 1e-6f, y.data());
    double ss = 0;
    for (float v : x) ss += double(v) * v;
    const double s = 1.0 / std::sqrt(ss / n + 1e-6);
    for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(y[i], x[i] * s * w[i], 1e-5 * (1 + std::fabs(y[i])));
  }
}

TEST(L2Norm, GivesUnitVectorUpToEps) {
  auto x = Random(64, 7);
  std::vector<float> y(64);
  L2Norm(x.data(), 64, 1e-6f, y.data());
  double ss = 0, xs = 0;
  for (int i = 0; i < 64; ++i) ss += double(y[i]) * y[i], xs += double(x[i]) * x[i];
  EXPECT_NEAR(ss, xs / (xs + 1e-6), 1e-5);
}

TEST(Activation, SoftplusSwitchesToIdentityAboveTwenty) {
  EXPECT_EQ(Softplus(20.5f), 20.5f);
  EXPECT_NEAR(Softplus(0.0f), std::log(2.0f), 1e-7);
  EXPECT_NEAR(Softplus(20.0f), 20.0f, 1e-6);
  EXPECT_NEAR(Silu(1.0f), 1.0f / (1.0f + std::exp(-1.0f)), 1e-7);
  EXPECT_NEAR(Sigmoid(-3.0f), 1.0 / (1.0 + std::exp(3.0)), 1e-7);
}

TEST(Rope, NeoxRotatesPairsHalfApartAndLeavesTailAlone) {
  RopeParams p;
  p.n_rot = 8;
  p.freq_base = 10000.0f;
  std::vector<float> cache(8);
  const int pos = 5;
  RopeCache(p, pos, cache.data());
  auto x = Random(12, 8);
  auto y = x;
  RopeApply(cache.data(), 8, y.data());
  for (int i = 0; i < 4; ++i) {
    const double th = pos * std::pow(10000.0, -2.0 * i / 8);
    EXPECT_NEAR(y[i], x[i] * std::cos(th) - x[i + 4] * std::sin(th), 1e-5);
    EXPECT_NEAR(y[i + 4], x[i] * std::sin(th) + x[i + 4] * std::cos(th), 1e-5);
  }
  for (int i = 8; i < 12; ++i) EXPECT_EQ(y[i], x[i]);
}

TEST(Rope, ImropeEqualsNeoxWhenSectionsCoverAllPairsAndZeroesTheFourthComponent) {
  RopeParams neox;
  neox.n_rot = 64;
  neox.freq_base = 1e7f;
  RopeParams im = neox;
  im.imrope = true;
  im.sections = {11, 11, 10, 0};
  std::vector<float> a(64), b(64);
  RopeCache(neox, 1234, a.data());
  RopeCache(im, 1234, b.data());
  EXPECT_EQ(a, b);
  im.sections = {1, 1, 1, 1};  // sector 3 of every 4 falls in "e": angle 0
  RopeCache(im, 1234, b.data());
  EXPECT_EQ(b[2 * 3], 1.0f);
  EXPECT_EQ(b[2 * 3 + 1], 0.0f);
  EXPECT_EQ(b[2 * 1], a[2 * 1]);
}

TEST(CausalConv, MatchesWindowDefinition) {
  const int C = 5, Kc = 4, T = 7;
  auto w = Random(C * Kc, 9), x = Random(T * C, 10);
  std::vector<float> state(C * (Kc - 1), 0.0f), y(T * C);
  CausalConvRun(state.data(), w.data(), x.data(), C, T, 0, C, Kc, y.data(), C);
  for (int c = 0; c < C; ++c)
    for (int t = 0; t < T; ++t) {
      double s = 0;
      for (int i = 0; i < Kc; ++i) {
        const int tt = t - (Kc - 1) + i;
        if (tt >= 0) s += double(x[tt * C + c]) * w[c * Kc + i];
      }
      EXPECT_NEAR(y[t * C + c], s, 1e-5);
    }
  for (int c = 0; c < C; ++c)
    for (int j = 0; j < Kc - 1; ++j) EXPECT_EQ(state[c * (Kc - 1) + j], x[(T - (Kc - 1) + j) * C + c]);
}

TEST(Gdn, HeadStepMatchesReferenceOverManyTokens) {
  for (int S : {1, 8, 33, 64}) {
    std::vector<float> M(S * S, 0.0f), Mr(S * S, 0.0f), o(S), orf(S);
    for (int t = 0; t < 6; ++t) {
      auto q = Random(S, 20 + t, 1.0f / std::sqrt(S)), k = Random(S, 40 + t, 1.0f / std::sqrt(S)),
           v = Random(S, 60 + t);
      GdnHeadStep(M.data(), q.data(), k.data(), v.data(), 0.7f, -0.3f, S, o.data());
      ref::GdnHeadStep(Mr.data(), q.data(), k.data(), v.data(), 0.7f, -0.3f, S, orf.data());
      for (int j = 0; j < S; ++j) EXPECT_NEAR(o[j], orf[j], 1e-4);
    }
    for (int i = 0; i < S * S; ++i) EXPECT_NEAR(M[i], Mr[i], 1e-4);
  }
}

// GdnHeadSteps (state rows in blocks through all tokens, token chunks of kGdnTokenChunk) gives the bits of
// GdnHeadStep token by token, on every code path, with and without a separate start state and outputs.
// The parameter is the SIMD width (0: the portable loop).
class GdnWidth : public ::testing::TestWithParam<int> {};

TEST_P(GdnWidth, MultiTokenStepsMatchTokenByTokenBitwise) {
  const int width = GetParam();
  REWIND_SKIP_WITHOUT_WIDTH(width);
  for (int S : {8, 32, 40, 64, 128}) {
    for (int T : {1, 2, 5, 17, 70}) {
      const auto M0 = Random(S * S, 7 + S, 0.5f);
      std::vector<float> Ma(S * S, 0.0f), Mb(S * S, 0.0f), oa(T * S, -1.0f), ob(T * S, -1.0f);
      std::vector<std::vector<float>> q, k, v;
      std::vector<GdnToken> toks(T);
      for (int t = 0; t < T; ++t) {
        q.push_back(Random(S, 200 + t, 1.0f / std::sqrt(S)));
        k.push_back(Random(S, 300 + t, 1.0f / std::sqrt(S)));
        v.push_back(Random(S, 400 + t));
      }
      for (int t = 0; t < T; ++t) {
        const float beta = 0.3f + 0.01f * t, g = -0.05f * (t % 7);
        float* o = t % 3 == 2 ? nullptr : oa.data() + t * S;
        const float* in = t == 0 ? M0.data() : nullptr;
        if (width == 0) {
          GdnHeadStepPortable(Ma.data(), q[t].data(), k[t].data(), v[t].data(), beta, g, S, o, in);
        } else {
          GdnHeadStepSimd(width, Ma.data(), q[t].data(), k[t].data(), v[t].data(), beta, g, S, o, in);
        }
        toks[t] = {q[t].data(), k[t].data(), v[t].data(), beta, g, t % 3 == 2 ? nullptr : ob.data() + t * S};
      }
      GdnHeadSteps(Mb.data(), toks, S, M0.data(), width);
      EXPECT_EQ(std::memcmp(Ma.data(), Mb.data(), Ma.size() * 4), 0) << "S " << S << " T " << T << " w " << width;
      EXPECT_EQ(std::memcmp(oa.data(), ob.data(), oa.size() * 4), 0) << "S " << S << " T " << T << " w " << width;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Widths, GdnWidth, ::testing::Values(0, 256, 512), SimdWidthName);

TEST(Gdn, ReplayWithoutOutputGivesTheSameState) {
  const int S = 16;
  std::vector<float> M(S * S, 0.0f), M2(S * S, 0.0f), o(S);
  for (int t = 0; t < 4; ++t) {
    auto q = Random(S, 80 + t), k = Random(S, 90 + t), v = Random(S, 100 + t);
    GdnHeadStep(M.data(), q.data(), k.data(), v.data(), 0.5f, -0.1f, S, o.data());
    GdnHeadStep(M2.data(), q.data(), k.data(), v.data(), 0.5f, -0.1f, S, nullptr);
  }
  EXPECT_EQ(M, M2);
}

struct PagedFixture {
  std::vector<std::vector<uint8_t>> k, v;
  std::vector<const uint8_t*> kp, vp;
  KvPages view;
  PagedFixture(const std::vector<float>& K, const std::vector<float>& V, int n, int W, int page, KvTypes types) {
    const int n_pages = (n + page - 1) / page;
    const size_t krb = KvRowBytes(types.k, W), vrb = KvRowBytes(types.v, W);
    for (int pg = 0; pg < n_pages; ++pg) {
      k.emplace_back(page * krb);
      v.emplace_back(page * vrb);
      for (int r = 0; r < page && pg * page + r < n; ++r) {
        QuantizeKvRow(types.k, K.data() + static_cast<size_t>(pg * page + r) * W, k.back().data() + r * krb, W);
        QuantizeKvRow(types.v, V.data() + static_cast<size_t>(pg * page + r) * W, v.back().data() + r * vrb, W);
      }
    }
    for (auto& p : k) kp.push_back(p.data());
    for (auto& p : v) vp.push_back(p.data());
    view = {kp.data(), vp.data(), page, W, types.k, types.v};
  }
};

// Every cache type, plus K and V of different types.
std::vector<KvTypes> AllKvTypeCombos() {
  std::vector<KvTypes> out(std::begin(kAllKvTypes), std::end(kAllKvTypes));
  out.push_back({KvType::kQ8_0, KvType::kF16});
  out.push_back({KvType::kF16, KvType::kQ4_0});
  return out;
}

TEST(Attention, OnlineBlocksMatchTwoPassReferenceForEveryKvType) {
  const int D = 32, Hkv = 2, W = D * Hkv;
  for (KvTypes types : AllKvTypeCombos()) {
    for (int n : {1, 2, 31, 32, 33, 100}) {
      auto K = Random(n * W, 11), V = Random(n * W, 12), q = Random(D, 13, 2.0f);
      PagedFixture kv(K, V, n, W, 8, types);
      std::vector<float> o(D), orf(D);
      for (int h = 0; h < Hkv; ++h) {
        AttendOne(q.data(), D, h, n, kv.view, 0.25f, o.data());
        ref::AttendOne(q.data(), D, h, n, kv.view, 0.25f, orf.data());
        for (int d = 0; d < D; ++d) EXPECT_NEAR(o[d], orf[d], 1e-5) << n << " " << KvTypesName(types);
      }
    }
  }
}

TEST(Attention, GroupOfQueriesGivesTheBitsOfOneCallPerQuery) {
  const int D = 32, Hkv = 2, W = D * Hkv, n = 100;
  for (KvTypes types : AllKvTypeCombos()) {
    auto K = Random(n * W, 21), V = Random(n * W, 22);
    PagedFixture kv(K, V, n, W, 8, types);
    // Queries with different key counts (causal rows of a chunk, some ending inside a block, one with none).
    const std::vector<int> n_keys = {1, 31, 32, 33, 64, 70, 99, 100, 0, 45};
    const int Q = static_cast<int>(n_keys.size());
    auto qs = Random(Q * D, 23, 2.0f);
    for (int h = 0; h < Hkv; ++h) {
      std::vector<float> one(Q * D), group(Q * D, -1.0f);
      std::vector<AttendQuery> aq;
      for (int j = 0; j < Q; ++j) {
        AttendOne(qs.data() + j * D, D, h, n_keys[j], kv.view, 0.25f, one.data() + j * D);
        aq.push_back({qs.data() + j * D, group.data() + j * D, n_keys[j]});
      }
      AttendGroup(aq.data(), Q, D, h, kv.view, 0.25f);
      EXPECT_EQ(std::memcmp(one.data(), group.data(), one.size() * sizeof(float)), 0)
          << KvTypesName(types) << " h " << h;
    }
  }
}

// At depth, across segments (kAttnSegment) and blocks: a group of queries with different key counts (causal
// rows of a chunk whose tiles straddle segment boundaries), the same queries one by one, and the segment-split
// form (AttendSegment per segment, then AttendCombine) all give the same bits; and they follow the two-pass
// reference. Head dims with a tail (D % 8 != 0, float caches) and without.
TEST(Attention, TilesAndSegmentsAtDepthGiveTheBitsOfOneQueryForEveryKvType) {
  const int Hkv = 2, n = 2 * kAttnSegment + 150;
  const std::vector<int> n_keys = {n, n - 1, 2 * kAttnSegment + 1, 2 * kAttnSegment, 2 * kAttnSegment - 1,
                                   kAttnSegment + 33, kAttnSegment, 700, 1, 0, n - 40};
  const int Q = static_cast<int>(n_keys.size());
  for (int D : {64, 36}) {
    const int W = D * Hkv;
    auto K = Random(n * W, 31), V = Random(n * W, 32), qs = Random(Q * D, 33, 2.0f);
    for (KvTypes types : AllKvTypeCombos()) {
      if (D % KvBlockElems(types.k) != 0 || D % KvBlockElems(types.v) != 0) continue;
      PagedFixture kv(K, V, n, W, 32, types);
      const int h = 1;
      std::vector<float> one(Q * D), group(Q * D, -1.0f), split(Q * D, -2.0f), ref1(D);
      std::vector<AttendQuery> aq, sq;
      for (int j = 0; j < Q; ++j) {
        AttendOne(qs.data() + j * D, D, h, n_keys[j], kv.view, 0.25f, one.data() + j * D);
        aq.push_back({qs.data() + j * D, group.data() + j * D, n_keys[j]});
        sq.push_back({qs.data() + j * D, split.data() + j * D, n_keys[j]});
      }
      AttendGroup(aq.data(), Q, D, h, kv.view, 0.25f);
      const int n_seg = AttnSegments(n);
      std::vector<std::vector<float>> parts(n_seg, std::vector<float>(Q * AttnPartialFloats(D)));
      std::vector<const float*> ptrs;
      for (int seg = n_seg - 1; seg >= 0; --seg) AttendSegment(sq.data(), Q, D, h, kv.view, 0.25f, seg, parts[seg].data());
      for (auto& p : parts) ptrs.push_back(p.data());
      AttendCombine(sq.data(), Q, D, ptrs.data(), n_seg);
      EXPECT_EQ(std::memcmp(one.data(), group.data(), one.size() * sizeof(float)), 0) << KvTypesName(types) << " D " << D;
      EXPECT_EQ(std::memcmp(one.data(), split.data(), one.size() * sizeof(float)), 0) << KvTypesName(types) << " D " << D;
      for (int j = 0; j < Q; j += 3) {
        ref::AttendOne(qs.data() + j * D, D, h, n_keys[j], kv.view, 0.25f, ref1.data());
        for (int d = 0; d < D; ++d) ASSERT_NEAR(one[j * D + d], ref1[d], 2e-5) << KvTypesName(types) << " q " << j;
      }
    }
  }
}

// Every SIMD width of the tiles gives the portable code's bits: head dims with and without a tail (36), with a
// 16-wide part and an 8-wide rest (40), the model's (128, 256); groups of 1 to 12 queries whose key counts end
// inside blocks, at block and segment edges, and at zero, either shared by 4 consecutive queries (one token's
// heads: full register tiles) or each its own; every cache type (K packed by lane groups at 512).
class AttentionWidth : public ::testing::TestWithParam<int> {};

TEST_P(AttentionWidth, GivesThePortableBitsForEveryShapeAndKvType) {
  const int width = GetParam();
  REWIND_SKIP_WITHOUT_WIDTH(width);
  const int Hkv = 2, n = kAttnSegment + 77;
  const std::vector<int> keys = {n, 1, 31, 32, 33, kAttnSegment, kAttnSegment + 1, 0, n - 3, 200, n - 1};
  for (int D : {36, 40, 128, 256}) {
    const int W = D * Hkv;
    auto K = Random(n * W, 41), V = Random(n * W, 42);
    for (KvTypes types : AllKvTypeCombos()) {
      if (D % KvBlockElems(types.k) != 0 || D % KvBlockElems(types.v) != 0) continue;
      PagedFixture kv(K, V, n, W, 16, types);
      for (int Q : {1, 3, 4, 5, 11, 12}) {
        const int per_token = Q % 2 == 0 ? 4 : 1;
        auto qs = Random(Q * D, 43 + Q, 2.0f);
        std::vector<float> want(Q * D, -1.0f), got(Q * D, -2.0f);
        std::vector<AttendQuery> wq, gq;
        for (int j = 0; j < Q; ++j) {
          const int nk = keys[((j / per_token) * 7 + Q) % keys.size()];
          wq.push_back({qs.data() + j * D, want.data() + j * D, nk});
          gq.push_back({qs.data() + j * D, got.data() + j * D, nk});
        }
        AttendGroupSimd(0, wq.data(), Q, D, 1, kv.view, 0.125f);
        AttendGroupSimd(width, gq.data(), Q, D, 1, kv.view, 0.125f);
        ASSERT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)), 0)
            << "width " << width << " D " << D << " " << KvTypesName(types) << " Q " << Q;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Widths, AttentionWidth, ::testing::Values(256, 512), SimdWidthName);

TEST(ExpApprox, IsWithinThreeUlpOfExpAndZeroBelowTheRange) {
  float worst = 0.0f;
  for (float x = -87.0f; x <= 88.0f; x += 0.0137f) {
    const double want = std::exp(static_cast<double>(x));
    const float got = ExpApprox(x);
    const float ulp = std::nextafter(static_cast<float>(want), INFINITY) - static_cast<float>(want);
    worst = std::max(worst, static_cast<float>(std::fabs(got - want) / ulp));
  }
  EXPECT_LT(worst, 3.0f);
  EXPECT_EQ(ExpApprox(0.0f), 1.0f);
  EXPECT_EQ(ExpApprox(-INFINITY), 0.0f);
  EXPECT_EQ(ExpApprox(-100.0f), 0.0f);
  EXPECT_EQ(ExpApprox(NAN), 0.0f);
  std::printf("ExpApprox: worst %.2f ulp over [-87, 88]\n", worst);
}

TEST(ThreadPool, CoversEveryIndexExactlyOnce) {
  for (int threads : {1, 2, 3, 5, 8, 16}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 2, 5, 100, 1001}) {
      for (int64_t grain : {1, 4, 7}) {
        std::vector<std::atomic<int>> hits(n);
        pool.ParallelFor(n, [&](int64_t b, int64_t e) {
          EXPECT_EQ(b % grain, 0) << "ranges start at multiples of the grain";
          for (int64_t i = b; i < e; ++i) hits[i]++;
        }, grain);
        for (auto& h : hits) EXPECT_EQ(h.load(), 1) << "threads " << threads << " n " << n << " grain " << grain;
      }
    }
  }
}

TEST(ThreadPool, RunCallsEveryThreadIndexOncePerRegionAndCountsRegions) {
  for (int threads : {1, 2, 3, 5, 8, 16}) {
    ThreadPool pool(threads);
    std::vector<std::atomic<int>> calls(threads);
    for (int r = 0; r < 40; ++r)
      pool.Run([&](int i, int nt) {
        EXPECT_EQ(nt, threads);
        calls[i]++;
      });
    for (auto& c : calls) EXPECT_EQ(c.load(), 40);
    EXPECT_EQ(pool.regions(), threads > 1 ? 40u : 0u);
  }
}

TEST(ThreadPool, WorkersParkedAfterIdleTimeWakeForTheNextRegion) {
  ThreadPool pool(4);
  std::atomic<int> sum{0};
  for (int r = 0; r < 3; ++r) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // longer than the spin: workers park
    pool.Run([&](int i, int) { sum += i + 1; });
  }
  EXPECT_EQ(sum.load(), 3 * (1 + 2 + 3 + 4));
}

TEST(ThreadPool, SharesAreContiguousBalancedAndAlignedToTheGrain) {
  for (int nt : {1, 3, 16, 64})
    for (int64_t n : {1, 63, 64, 4097})
      for (int64_t grain : {1, 16}) {
        int64_t prev = 0, lo = n, hi = 0;
        for (int i = 0; i < nt; ++i) {
          int64_t b, e;
          ShareOf(n, grain, i, nt, &b, &e);
          EXPECT_EQ(b, prev);
          EXPECT_TRUE(b % grain == 0 || b == n);
          prev = e;
          lo = std::min(lo, (e - b + grain - 1) / grain), hi = std::max(hi, (e - b + grain - 1) / grain);
        }
        EXPECT_EQ(prev, n);
        if ((n + grain - 1) / grain >= nt) {
          EXPECT_LE(hi - lo, 1) << "units per thread differ by at most one";
        }
      }
}

}  // namespace
}  // namespace rw::kernels
