// The Mamba-2 state update (kernels/ssm.h): AVX2 vs the portable twin bit for bit, any token split gives the
// same bits, and both stay within float rounding of the double reference (kernels/ref/ssm_ref.h).
#include "kernels/ssm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "base/cpu_features_testing.h"
#include "kernels/ref/ssm_ref.h"

namespace rw::kernels {
namespace {

// T tokens of one head with random inputs; the SsmToken pointers refer into the vectors.
struct HeadRun {
  int32_t P, N, T;
  std::vector<float> x, B, C, y, dt, dA, s0;
  std::vector<SsmToken> toks;
  HeadRun(int32_t p, int32_t n, int32_t t, uint32_t seed) : P(p), N(n), T(t) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::uniform_real_distribution<float> ud(0.0f, 1.0f);
    auto fill = [&](std::vector<float>& v, size_t n_el) {
      v.resize(n_el);
      for (float& e : v) e = nd(rng);
    };
    fill(x, static_cast<size_t>(T) * P);
    fill(B, static_cast<size_t>(T) * N);
    fill(C, static_cast<size_t>(T) * N);
    fill(s0, static_cast<size_t>(P) * N);
    y.assign(static_cast<size_t>(T) * P, 0.0f);
    for (int32_t i = 0; i < T; ++i) {
      dt.push_back(0.001f + 0.2f * ud(rng));
      dA.push_back(std::exp(-dt.back() * (1.0f + 15.0f * ud(rng))));
    }
    for (int32_t i = 0; i < T; ++i)
      toks.push_back({x.data() + i * P, B.data() + i * N, C.data() + i * N, dt[i], dA[i], y.data() + i * P});
  }
};

TEST(Ssm, Avx2StepsMatchThePortableTwinBitForBit) {
  REWIND_SKIP_WITHOUT_AVX2();
  for (int32_t N : {1, 5, 8, 13, 16, 31, 32, 64, 128})
    for (int32_t P : {1, 3, 16}) {
      HeadRun a(P, N, 9, static_cast<uint32_t>(N * 100 + P)), b = a;
      b.toks.clear();
      for (int32_t i = 0; i < b.T; ++i)
        b.toks.push_back({b.x.data() + i * P, b.B.data() + i * N, b.C.data() + i * N, b.dt[i], b.dA[i],
                          b.y.data() + i * P});
      std::vector<float> sa(a.s0.size()), sb(a.s0.size());
      SsmHeadSteps(sa.data(), a.toks, P, N, a.s0.data(), 256);
      SsmHeadSteps(sb.data(), b.toks, P, N, b.s0.data(), 0);
      ASSERT_EQ(std::memcmp(sa.data(), sb.data(), sa.size() * 4), 0) << "state N=" << N << " P=" << P;
      ASSERT_EQ(std::memcmp(a.y.data(), b.y.data(), a.y.size() * 4), 0) << "y N=" << N << " P=" << P;
    }
}

TEST(Ssm, AnySplitOfTheTokensGivesTheSameBits) {
  const int32_t P = 8, N = 24, T = 11;
  for (int width : {0, -1}) {
    HeadRun whole(P, N, T, 7);
    std::vector<float> s_whole(whole.s0.size());
    SsmHeadSteps(s_whole.data(), whole.toks, P, N, whole.s0.data(), width);
    for (int32_t cut = 0; cut <= T; ++cut) {
      HeadRun part(P, N, T, 7);
      std::vector<float> s = part.s0;
      SsmHeadSteps(s.data(), std::span<const SsmToken>(part.toks).subspan(0, cut), P, N, nullptr, width);
      for (int32_t i = cut; i < T; ++i)  // the rest one token per call
        SsmHeadSteps(s.data(), std::span<const SsmToken>(part.toks).subspan(i, 1), P, N, nullptr, width);
      ASSERT_EQ(std::memcmp(s.data(), s_whole.data(), s.size() * 4), 0) << "cut " << cut;
      ASSERT_EQ(std::memcmp(part.y.data(), whole.y.data(), part.y.size() * 4), 0) << "cut " << cut;
    }
  }
}

TEST(Ssm, StepsStayWithinFloatRoundingOfTheDoubleReference) {
  const int32_t P = 16, N = 64, T = 40;
  HeadRun r(P, N, T, 3);
  std::vector<float> s(r.s0.size());
  SsmHeadSteps(s.data(), r.toks, P, N, r.s0.data());
  std::vector<double> sd(r.s0.begin(), r.s0.end()), yd(P);
  double max_err = 0;
  for (int32_t t = 0; t < T; ++t) {
    ref::SsmHeadStep(sd.data(), r.x.data() + t * P, r.B.data() + t * N, r.C.data() + t * N, r.dt[t], r.dA[t],
                     P, N, yd.data());
    for (int32_t p = 0; p < P; ++p)
      max_err = std::max(max_err, std::fabs(yd[p] - r.y[t * P + p]) / (1.0 + std::fabs(yd[p])));
  }
  for (size_t i = 0; i < s.size(); ++i)
    max_err = std::max(max_err, std::fabs(sd[i] - s[i]) / (1.0 + std::fabs(sd[i])));
  std::printf("max relative |fast - double reference| over %d tokens: %.3g\n", T, max_err);
  EXPECT_LT(max_err, 1e-5);
}

TEST(Ssm, NoTokensCopiesTheInputStateOnly) {
  std::vector<float> in = {1, 2, 3, 4, 5, 6}, out(6, 0.0f);
  SsmHeadSteps(out.data(), {}, 2, 3, in.data());
  EXPECT_EQ(out, in);
}

}  // namespace
}  // namespace rw::kernels
