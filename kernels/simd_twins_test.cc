// SIMD paths that must give exactly the bits of their portable twins: F16 row conversion (kernels/f16_row.h)
// the AVX2 gated-delta step (kernels/gdn_avx2.cc) and the 8-channel causal conv (kernels/conv.cc).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "base/cpu_features_testing.h"
#include "kernels/activation.h"
#include "kernels/conv.h"
#include "kernels/f16.h"
#include "kernels/f16_row.h"
#include "kernels/gdn.h"

namespace rw::kernels {
namespace {

TEST(SimdTwins, HalfToFloatRowConvertsEveryHalfExactly) {
  REWIND_SKIP_WITHOUT_AVX2();
  std::vector<uint16_t> h(65536 + 5);
  for (size_t i = 0; i < h.size(); ++i) h[i] = static_cast<uint16_t>(i);
  std::vector<float> f(h.size());
  HalfToFloatRow(h.data(), f.data(), static_cast<int64_t>(h.size()));
  for (size_t i = 0; i < h.size(); ++i) {
    const float e = HalfToFloat(h[i]);
    if (std::isnan(e)) {
      EXPECT_TRUE(std::isnan(f[i])) << i;
    } else {
      ASSERT_EQ(std::memcmp(&e, &f[i], 4), 0) << "half " << i;
    }
  }
}

TEST(SimdTwins, FloatToHalfRowRoundsLikeTheScalarConversion) {
  REWIND_SKIP_WITHOUT_AVX2();
  std::mt19937 rng(5);
  std::vector<float> f;
  for (int i = 0; i < 100000; ++i) {
    uint32_t bits = rng();
    float x;
    std::memcpy(&x, &bits, 4);
    if (!std::isnan(x)) f.push_back(x);
  }
  // Ties and near-ties around half precision, subnormals, overflow.
  for (float x : {0.0f, -0.0f, 1.0f + 1.0f / 2048, 1.0f + 3.0f / 2048, 65504.0f, 65520.0f, 65519.99f, 1e-8f,
                  5.96e-8f, 2.98e-8f, -3.0e-8f, 1e30f, -1e30f, INFINITY, -INFINITY})
    f.push_back(x);
  std::vector<uint16_t> h(f.size());
  FloatToHalfRow(f.data(), h.data(), static_cast<int64_t>(f.size()));
  for (size_t i = 0; i < f.size(); ++i) ASSERT_EQ(h[i], FloatToHalf(f[i])) << f[i];
}

// The parameter is the SIMD width: 256 (AVX2) or 512 (AVX-512); SimdTwinsGdn adds 0, the portable loop.
class SimdTwinsGdnSimd : public ::testing::TestWithParam<int> {};
class SimdTwinsGdn : public ::testing::TestWithParam<int> {};

// One token's q, k (N(0, 1/S)) and v (N(0, 1)), drawn element by element from d and rng.
struct Qkv {
  std::vector<float> q, k, v;
  Qkv(int S, std::normal_distribution<float>& d, std::mt19937& rng) : q(S), k(S), v(S) {
    for (int i = 0; i < S; ++i) {
      q[i] = d(rng) / std::sqrt(float(S));
      k[i] = d(rng) / std::sqrt(float(S));
      v[i] = d(rng);
    }
  }
};

TEST_P(SimdTwinsGdnSimd, HeadStepMatchesThePortableLoopBitForBit) {
  const int width = GetParam();
  REWIND_SKIP_WITHOUT_WIDTH(width);
  std::mt19937 rng(11);
  std::normal_distribution<float> d(0.0f, 1.0f);
  for (int S : {1, 8, 33, 64, 128}) {
    std::vector<float> M(S * S, 0.0f), Mp(S * S, 0.0f), o(S), op(S);
    for (int t = 0; t < 5; ++t) {
      const Qkv x(S, d, rng);
      const float *q = x.q.data(), *k = x.k.data(), *v = x.v.data();
      float* out = t == 2 ? nullptr : o.data();  // replay step without output
      GdnHeadStepSimd(width, M.data(), q, k, v, 0.6f, -0.2f, S, out);
      GdnHeadStepPortable(Mp.data(), q, k, v, 0.6f, -0.2f, S, out ? op.data() : nullptr);
      if (out) {
        ASSERT_EQ(std::memcmp(o.data(), op.data(), S * 4), 0) << "width " << width << " S " << S << " t " << t;
      }
    }
    ASSERT_EQ(std::memcmp(M.data(), Mp.data(), M.size() * 4), 0) << "width " << width << " S " << S;
  }
}

TEST_P(SimdTwinsGdn, HeadStepFromAnotherStateEqualsCopyThenStep) {
  const int width = GetParam();
  REWIND_SKIP_WITHOUT_WIDTH(width);
  std::mt19937 rng(17);
  std::normal_distribution<float> d(0.0f, 1.0f);
  for (int S : {8, 33, 128}) {
    std::vector<float> src(S * S);
    for (auto& x : src) x = d(rng);
    const Qkv x(S, d, rng);
    const float *q = x.q.data(), *k = x.k.data(), *v = x.v.data();
    std::vector<float> copied = src, fused(S * S, -7.0f), o1(S), o2(S);
    const std::vector<float> before = src;
    auto step = [&](float* M, float* o, const float* M_in) {
      if (width == 0) {
        GdnHeadStepPortable(M, q, k, v, 0.6f, -0.2f, S, o, M_in);
      } else {
        GdnHeadStepSimd(width, M, q, k, v, 0.6f, -0.2f, S, o, M_in);
      }
    };
    step(copied.data(), o1.data(), nullptr);
    step(fused.data(), o2.data(), src.data());
    EXPECT_EQ(std::memcmp(copied.data(), fused.data(), copied.size() * 4), 0) << "width " << width << " S " << S;
    EXPECT_EQ(std::memcmp(o1.data(), o2.data(), S * 4), 0) << "width " << width << " S " << S;
    EXPECT_EQ(std::memcmp(src.data(), before.data(), src.size() * 4), 0) << "the source state was written";
  }
}

INSTANTIATE_TEST_SUITE_P(Widths, SimdTwinsGdnSimd, ::testing::Values(256, 512), SimdWidthName);
INSTANTIATE_TEST_SUITE_P(Widths, SimdTwinsGdn, ::testing::Values(0, 256, 512), SimdWidthName);

TEST(SimdTwins, CausalConvMatchesThePortableLoopBitForBit) {
  REWIND_SKIP_WITHOUT_AVX2();
  std::mt19937 rng(12);
  std::normal_distribution<float> d(0.0f, 1.0f);
  for (int Kc : {2, 4}) {
    for (int C : {8, 13, 40}) {
      const int T = 9, stride = C + 3;
      std::vector<float> w(C * Kc), x(T * stride), s1(C * (Kc - 1)), y1(T * C, -1.0f), y2(T * C, -1.0f);
      for (auto& v : w) v = d(rng);
      for (auto& v : x) v = d(rng);
      for (auto& v : s1) v = d(rng);
      x[0] = -0.0f;  // a -0.0 sum must stay +0.0 (the portable loop starts from 0.0f)
      std::vector<float> s2 = s1;
      // Split into two calls over tokens and an odd channel range, as a batch split would.
      for (auto [t0, n] : {std::pair{0, 4}, std::pair{4, T - 4}}) {
        CausalConvRun(s1.data(), w.data(), x.data() + t0 * stride, stride, n, 1, C, Kc, y1.data() + t0 * C, C);
        CausalConvRunPortable(s2.data(), w.data(), x.data() + t0 * stride, stride, n, 1, C, Kc, y2.data() + t0 * C,
                              C);
      }
      ASSERT_EQ(std::memcmp(y1.data(), y2.data(), y1.size() * 4), 0) << "Kc " << Kc << " C " << C;
      ASSERT_EQ(std::memcmp(s1.data(), s2.data(), s1.size() * 4), 0) << "Kc " << Kc << " C " << C;
    }
  }
}

TEST(SimdTwins, ActivationRowsMatchTheScalarFunctionsBitForBit) {
  REWIND_SKIP_WITHOUT_AVX2();
  std::mt19937 rng(13);
  std::normal_distribution<float> d(0.0f, 4.0f);
  const int n = 53;  // 6 vectors and a tail
  std::vector<float> a(n), b(n);
  for (int i = 0; i < n; ++i) {
    a[i] = d(rng);
    b[i] = d(rng);
  }
  a[0] = 0.0f;
  a[1] = -0.0f;
  a[2] = 95.0f;
  a[3] = -95.0f;
  a[4] = 87.5f;
  a[5] = -87.5f;
  std::vector<float> got(n), want(n);
  SwiGlu(a.data(), b.data(), n, got.data());
  for (int i = 0; i < n; ++i) want[i] = Silu(a[i]) * b[i];
  EXPECT_EQ(std::memcmp(got.data(), want.data(), n * 4), 0) << "SwiGlu";
  got = a;
  SiluInPlace(got.data(), n);
  for (int i = 0; i < n; ++i) want[i] = Silu(a[i]);
  EXPECT_EQ(std::memcmp(got.data(), want.data(), n * 4), 0) << "SiluInPlace";
  got = b;
  MulSilu(got.data(), a.data(), n);
  for (int i = 0; i < n; ++i) want[i] = b[i] * Silu(a[i]);
  EXPECT_EQ(std::memcmp(got.data(), want.data(), n * 4), 0) << "MulSilu";
  got = b;
  MulSigmoid(got.data(), a.data(), n);
  for (int i = 0; i < n; ++i) want[i] = b[i] * Sigmoid(a[i]);
  EXPECT_EQ(std::memcmp(got.data(), want.data(), n * 4), 0) << "MulSigmoid";
  EXPECT_NEAR(Silu(2.0f), 2.0 / (1.0 + std::exp(-2.0)), 1e-6);
}

}  // namespace
}  // namespace rw::kernels
