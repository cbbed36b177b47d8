// GdnHeadSteps (kernels/gdn.h) with KDA tokens: the gated delta rule with one decay per key channel (Kimi Delta
// Attention).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <span>
#include <vector>

#include "base/cpu_features_testing.h"
#include "kernels/gdn.h"
#include "kernels/random_testing.h"

namespace rw::kernels {
namespace {

// T tokens of one head: q, k (scaled like L2-normalised rows), v, per-channel decays in (0.3, 1), beta.
struct Tokens {
  std::vector<std::vector<float>> q, k, v, d;
  std::vector<float> beta;
  Tokens(int S, int T, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(0.3f, 1.0f);
    for (int t = 0; t < T; ++t) {
      q.push_back(Random(S, seed + 10 + t, 1.0f / std::sqrt(S)));
      k.push_back(Random(S, seed + 1000 + t, 1.0f / std::sqrt(S)));
      v.push_back(Random(S, seed + 2000 + t));
      std::vector<float> dec(S);
      for (float& x : dec) x = u(rng);
      d.push_back(dec);
      beta.push_back(0.2f + 0.03f * static_cast<float>(t % 11));
    }
  }
  // Outputs of tokens t % 3 == 2 are not asked for (a replay passes no output).
  std::vector<GdnToken> View(std::vector<float>* o, int S, int t0, int t1) const {
    std::vector<GdnToken> r;
    for (int t = t0; t < t1; ++t)
      r.push_back({q[t].data(), k[t].data(), v[t].data(), beta[t], 0.0f,
                   t % 3 == 2 ? nullptr : o->data() + static_cast<size_t>(t) * S, d[t].data()});
    return r;
  }
};

// The parameter is the SIMD width (0: the portable loop, 256: AVX2, 512: AVX-512).
class KdaWidth : public ::testing::TestWithParam<int> {};

TEST_P(KdaWidth, MultiTokenStepsMatchOneCallPerTokenBitwise) {
  const int width = GetParam();
  REWIND_SKIP_WITHOUT_WIDTH(width);
  for (int S : {8, 32, 40, 128}) {
    for (int T : {1, 2, 17, 40}) {
      const Tokens x(S, T, 17 * S + T);
      const auto M0 = Random(static_cast<size_t>(S) * S, 7 + S, 0.5f);
      std::vector<float> Ma(S * S), Mb(S * S), oa(T * S, -1.0f), ob(T * S, -1.0f);
      for (int t = 0; t < T; ++t) {
        const auto one = x.View(&oa, S, t, t + 1);
        GdnHeadSteps(Ma.data(), one, S, t == 0 ? M0.data() : nullptr, width);
      }
      GdnHeadSteps(Mb.data(), x.View(&ob, S, 0, T), S, M0.data(), width);
      EXPECT_EQ(std::memcmp(Ma.data(), Mb.data(), Ma.size() * 4), 0) << "S " << S << " T " << T;
      EXPECT_EQ(std::memcmp(oa.data(), ob.data(), oa.size() * 4), 0) << "S " << S << " T " << T;
    }
  }
}

// Threads may split one head's state rows (GdnHeadStepsRows): parts give the whole call's bits, GDN or KDA
// tokens, also where the whole call takes the AVX-512 register path and the parts do not.
TEST_P(KdaWidth, StateRowPartsMatchTheWholeHeadBitwise) {
  const int width = GetParam();
  REWIND_SKIP_WITHOUT_WIDTH(width);
  for (int S : {32, 64, 128}) {
    for (int T : {1, 5, 40}) {
      for (bool kda : {false, true}) {
        Tokens x(S, T, 5 * S + T);
        const auto M0 = Random(static_cast<size_t>(S) * S, 3 + S, 0.5f);
        std::vector<float> Ma(S * S), Mb(S * S), oa(T * S, -1.0f), ob(T * S, -1.0f);
        auto view = [&](std::vector<float>* o) {
          std::vector<GdnToken> v = x.View(o, S, 0, T);
          for (int t = 0; t < T; ++t) {
            if (!kda) v[t].decay = nullptr, v[t].g = -0.05f * static_cast<float>(t + 1);
          }
          return v;
        };
        GdnHeadSteps(Ma.data(), view(&oa), S, M0.data(), width);
        const auto vb = view(&ob);
        for (int parts : {2, 4}) {
          std::fill(ob.begin(), ob.end(), -1.0f);
          for (int p = 0; p < parts; ++p)
            GdnHeadStepsRows(Mb.data(), vb, S, M0.data(), S * p / parts, S * (p + 1) / parts, width);
          EXPECT_EQ(std::memcmp(Ma.data(), Mb.data(), Ma.size() * 4), 0) << "S " << S << " T " << T << " parts " << parts;
          EXPECT_EQ(std::memcmp(oa.data(), ob.data(), oa.size() * 4), 0) << "S " << S << " T " << T << " parts " << parts;
        }
      }
    }
  }
}

// A gate that is the same on every channel is GDN's scalar gate: the same bits as GDN tokens.
TEST_P(KdaWidth, AUniformGateGivesGatedDeltaNetBits) {
  const int width = GetParam();
  REWIND_SKIP_WITHOUT_WIDTH(width);
  const int S = 64, T = 9;
  Tokens x(S, T, 99);
  std::vector<GdnToken> g;
  std::vector<float> oa(T * S, -1.0f), ob(T * S, -1.0f);
  for (int t = 0; t < T; ++t) {
    const float gate = -0.07f * static_cast<float>(t + 1);
    x.d[t].assign(S, std::exp(gate));
    g.push_back({x.q[t].data(), x.k[t].data(), x.v[t].data(), x.beta[t], gate, oa.data() + t * S});
  }
  const auto M0 = Random(static_cast<size_t>(S) * S, 5, 0.5f);
  std::vector<float> Ma(S * S), Mb(S * S);
  GdnHeadSteps(Ma.data(), g, S, M0.data(), width);
  std::vector<GdnToken> k = x.View(&ob, S, 0, T);
  for (int t = 0; t < T; ++t) k[t].o = ob.data() + t * S;
  GdnHeadSteps(Mb.data(), k, S, M0.data(), width);
  EXPECT_EQ(std::memcmp(Ma.data(), Mb.data(), Ma.size() * 4), 0);
  EXPECT_EQ(std::memcmp(oa.data(), ob.data(), oa.size() * 4), 0);
}

// GDN and KDA tokens in one call (chunks split where the kind changes): the bits of one call per token.
TEST_P(KdaWidth, MixedGdnAndKdaTokensMatchOneCallPerTokenBitwise) {
  const int width = GetParam();
  REWIND_SKIP_WITHOUT_WIDTH(width);
  const int S = 32, T = 11;
  const Tokens x(S, T, 71);
  std::vector<float> oa(T * S, -1.0f), ob(T * S, -1.0f);
  std::vector<GdnToken> toks = x.View(&ob, S, 0, T);  // one call for all: Mb, ob
  for (int t = 0; t < T; ++t) {
    if (t % 4 < 2) continue;
    toks[t].decay = nullptr;  // tokens 2, 3, 6, 7, 10: one decay exp(g) on every channel
    toks[t].g = -0.1f * static_cast<float>(t);
  }
  const auto M0 = Random(static_cast<size_t>(S) * S, 8, 0.5f);
  std::vector<float> Ma(S * S), Mb(S * S);
  for (int t = 0; t < T; ++t) {
    GdnToken one = toks[t];  // one call per token: Ma, oa
    if (one.o != nullptr) one.o = oa.data() + t * S;
    GdnHeadSteps(Ma.data(), std::span(&one, 1), S, t == 0 ? M0.data() : nullptr, width);
  }
  GdnHeadSteps(Mb.data(), toks, S, M0.data(), width);
  EXPECT_EQ(std::memcmp(Ma.data(), Mb.data(), Ma.size() * 4), 0);
  EXPECT_EQ(std::memcmp(oa.data(), ob.data(), oa.size() * 4), 0);
}

INSTANTIATE_TEST_SUITE_P(Widths, KdaWidth, ::testing::Values(0, 256, 512), SimdWidthName);

// The SIMD paths (AVX2 rows, AVX-512 rows for S % 32 == 0, AVX-512 registers for S = 32, 64, 128) give the
// portable loop's bits. The parameter is the SIMD width.
class KdaSimdWidth : public ::testing::TestWithParam<int> {};

TEST_P(KdaSimdWidth, GivesThePortableBits) {
  const int width = GetParam();
  REWIND_SKIP_WITHOUT_WIDTH(width);
  for (int S : {5, 32, 72, 96, 128}) {
    const int T = 13;
    const Tokens x(S, T, 3 * S);
    std::vector<float> Ma(S * S, 0.0f), Mb(S * S, 0.0f), oa(T * S, -1.0f), ob(T * S, -1.0f);
    GdnHeadSteps(Ma.data(), x.View(&oa, S, 0, T), S, nullptr, 0);
    GdnHeadSteps(Mb.data(), x.View(&ob, S, 0, T), S, nullptr, width);
    EXPECT_EQ(std::memcmp(Ma.data(), Mb.data(), Ma.size() * 4), 0) << "S " << S;
    EXPECT_EQ(std::memcmp(oa.data(), ob.data(), oa.size() * 4), 0) << "S " << S;
  }
}

INSTANTIATE_TEST_SUITE_P(Widths, KdaSimdWidth, ::testing::Values(256, 512), SimdWidthName);

// Against the definition in double precision: M[i][j] *= d[i]; δ[j] = (v[j] - Σ_i M[i][j]k[i])·β;
// M[i][j] += k[i]δ[j]; o[j] = Σ_i M[i][j]q[i] / sqrt(S).
TEST(Kda, MatchesTheDefinitionInDoublePrecision) {
  const int S = 24, T = 12;
  const Tokens x(S, T, 555);
  std::vector<float> M(S * S, 0.0f), o(T * S, 0.0f);
  GdnHeadSteps(M.data(), x.View(&o, S, 0, T), S);
  std::vector<double> R(S * S, 0.0);  // R[i][j]
  for (int t = 0; t < T; ++t) {
    for (int i = 0; i < S; ++i)
      for (int j = 0; j < S; ++j) R[i * S + j] *= x.d[t][i];
    for (int j = 0; j < S; ++j) {
      double kv = 0;
      for (int i = 0; i < S; ++i) kv += R[i * S + j] * x.k[t][i];
      const double delta = (x.v[t][j] - kv) * x.beta[t];
      for (int i = 0; i < S; ++i) R[i * S + j] += x.k[t][i] * delta;
    }
    if (t % 3 == 2) continue;
    for (int j = 0; j < S; ++j) {
      double s = 0;
      for (int i = 0; i < S; ++i) s += R[i * S + j] * x.q[t][i];
      EXPECT_NEAR(o[t * S + j], s / std::sqrt(static_cast<double>(S)), 1e-4) << "t " << t << " j " << j;
    }
  }
  for (int i = 0; i < S; ++i)
    for (int j = 0; j < S; ++j) EXPECT_NEAR(M[j * S + i], R[i * S + j], 1e-4);  // M[j·S + i] = M[i][j]
}

}  // namespace
}  // namespace rw::kernels
