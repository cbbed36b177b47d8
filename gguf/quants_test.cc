// Tests of gguf/quants.h: fp16/bf16 conversion, block layouts (hand-built blocks), quantiser round trips and
// the scalar reference dot products.
#include "gguf/quants.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <immintrin.h>

#include "base/cpu_features_testing.h"

namespace rw::gguf {
namespace {

using TT = TensorType;

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

std::vector<float> RandomRow(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// ---- fp16 / bf16 ------------------------------------------------------------------------------------------

TEST(Fp16, EveryHalfRoundTripsThroughFloat) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = Fp16ToFp32(static_cast<uint16_t>(h));
    const bool nan = (h & 0x7C00) == 0x7C00 && (h & 0x3FF);
    if (nan) {
      ASSERT_TRUE(std::isnan(f)) << h;
      ASSERT_EQ(Fp32ToFp16(f), h | 0x200) << h;  // quietened, payload kept
    } else {
      ASSERT_EQ(Fp32ToFp16(f), h) << h;
    }
  }
}

TEST(Fp16, ConvertsHandPickedValues) {
  EXPECT_EQ(Fp16ToFp32(0x3C00), 1.0f);
  EXPECT_EQ(Fp16ToFp32(0xC000), -2.0f);
  EXPECT_EQ(Fp16ToFp32(0x7BFF), 65504.0f);
  EXPECT_EQ(Fp16ToFp32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(Fp16ToFp32(0x0400), std::ldexp(1.0f, -14));  // smallest normal
  EXPECT_TRUE(std::isinf(Fp16ToFp32(0xFC00)) && Fp16ToFp32(0xFC00) < 0);
  EXPECT_EQ(Bits(Fp16ToFp32(0x8000)), 0x80000000u);
  // Ties to even: 1 + 2^-11 lies halfway between 1 and 1 + 2^-10.
  EXPECT_EQ(Fp32ToFp16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);
  EXPECT_EQ(Fp32ToFp16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);
  EXPECT_EQ(Fp32ToFp16(std::nextafter(1.0f + std::ldexp(1.0f, -11), 2.0f)), 0x3C01);
  EXPECT_EQ(Fp32ToFp16(65519.0f), 0x7BFF);
  EXPECT_EQ(Fp32ToFp16(65520.0f), 0x7C00);
  EXPECT_EQ(Fp32ToFp16(1e30f), 0x7C00);
  EXPECT_EQ(Fp32ToFp16(-INFINITY), 0xFC00);
  EXPECT_EQ(Fp32ToFp16(std::ldexp(1.0f, -25)), 0x0000);      // tie -> even (0)
  EXPECT_EQ(Fp32ToFp16(3 * std::ldexp(1.0f, -25)), 0x0002);  // tie -> even (2)
  EXPECT_EQ(Fp32ToFp16(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(Fp32ToFp16(std::ldexp(1.0f, -26)), 0x0000);
  EXPECT_EQ(Fp32ToFp16(std::ldexp(1023.5f, -24)), 0x0400);   // rounds up into the normal range
  EXPECT_EQ(Fp32ToFp16(-0.0f), 0x8000);
  EXPECT_EQ(Fp32ToFp16(FromBits(0x00000001)), 0x0000);       // float subnormal
  EXPECT_EQ(Fp32ToFp16(NAN) & 0x7E00, 0x7E00);
}

__attribute__((target("f16c"))) uint16_t HardwareFp16(float f) {
  return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
}
__attribute__((target("f16c"))) float HardwareFp32(uint16_t h) { return _cvtsh_ss(h); }

TEST(Fp16, MatchesF16cHardwareOnAStrideOfAllFloats) {
  REWIND_SKIP_WITHOUT_AVX2();
  for (uint32_t h = 0; h < 65536; ++h) {
    ASSERT_EQ(Bits(Fp16ToFp32(static_cast<uint16_t>(h))), Bits(HardwareFp32(static_cast<uint16_t>(h)))) << h;
  }
  int checked = 0;
  for (uint64_t u = 0; u < (1ull << 32); u += 3989) {  // prime stride: ~1.08M patterns incl. NaNs, subnormals
    const float f = FromBits(static_cast<uint32_t>(u));
    ASSERT_EQ(Fp32ToFp16(f), HardwareFp16(f)) << std::hex << u;
    ++checked;
  }
  // Every float near the fp16 rounding boundaries of a few exponents, exhaustively.
  for (uint32_t base : {0x33000000u, 0x38800000u, 0x3F800000u, 0x477FE000u}) {
    for (uint32_t u = base - 0x4000; u < base + 0x4000; ++u) {
      ASSERT_EQ(Fp32ToFp16(FromBits(u)), HardwareFp16(FromBits(u))) << std::hex << u;
      ASSERT_EQ(Fp32ToFp16(FromBits(u | 0x80000000u)), HardwareFp16(FromBits(u | 0x80000000u)));
    }
  }
  EXPECT_GT(checked, 1000000);
}

TEST(Bf16, RoundsToNearestEvenAndQuietsNaN) {
  EXPECT_EQ(Fp32ToBf16(1.0f), 0x3F80);
  EXPECT_EQ(Fp32ToBf16(FromBits(0x3F808000)), 0x3F80);  // tie, even stays
  EXPECT_EQ(Fp32ToBf16(FromBits(0x3F818000)), 0x3F82);  // tie, odd rounds up
  EXPECT_EQ(Fp32ToBf16(FromBits(0x3F808001)), 0x3F81);
  EXPECT_EQ(Fp32ToBf16(FromBits(0x7F7FFFFF)), 0x7F80);  // max float rounds to inf
  EXPECT_EQ(Fp32ToBf16(FromBits(0x7F800001)), 0x7FC0);  // signalling NaN -> quiet
  EXPECT_EQ(Fp32ToBf16(FromBits(0xFFC00000)), 0xFFC0);
  EXPECT_EQ(Bits(Bf16ToFp32(0xBF80)), 0xBF800000u);
  for (uint32_t h = 0; h < 65536; ++h) {
    if ((h & 0x7F80) == 0x7F80 && (h & 0x7F)) continue;
    ASSERT_EQ(Fp32ToBf16(Bf16ToFp32(static_cast<uint16_t>(h))), h);
  }
}

// ---- Types ------------------------------------------------------------------------------------------------

TEST(Quants, ReportsVecDotTypesAndRowBytes) {
  EXPECT_EQ(VecDotType(TT::kQ4_0), TT::kQ8_0);
  EXPECT_EQ(VecDotType(TT::kQ5_0), TT::kQ8_0);
  EXPECT_EQ(VecDotType(TT::kQ8_0), TT::kQ8_0);
  EXPECT_EQ(VecDotType(TT::kQ4_1), TT::kQ8_1);
  EXPECT_EQ(VecDotType(TT::kQ5_1), TT::kQ8_1);
  EXPECT_EQ(VecDotType(TT::kQ4_K), TT::kQ8_K);
  EXPECT_EQ(VecDotType(TT::kQ5_K), TT::kQ8_K);
  EXPECT_EQ(VecDotType(TT::kQ6_K), TT::kQ8_K);
  EXPECT_EQ(VecDotType(TT::kF16), TT::kF16);
  EXPECT_EQ(VecDotType(TT::kBF16), TT::kBF16);
  EXPECT_EQ(VecDotType(TT::kF32), TT::kF32);
  EXPECT_EQ(RowBytes(TT::kQ4_K, 512), 288u);
  EXPECT_EQ(RowBytes(TT::kQ6_K, 256), 210u);
  EXPECT_EQ(RowBytes(TT::kQ8_0, 64), 68u);
  EXPECT_EQ(RowBytes(TT::kQ5_1, 32), 24u);
  EXPECT_EQ(RowBytes(TT::kF16, 3), 6u);
  EXPECT_EQ(RowBytes(TT::kQ8_K, 256), 292u);
  EXPECT_TRUE(IsSupportedWeightType(TT::kQ6_K));
  EXPECT_FALSE(IsSupportedWeightType(TT::kQ8_K));
  EXPECT_TRUE(IsSupportedWeightType(TT::kQ2_K));
  EXPECT_FALSE(IsQuantizableType(TT::kQ2_K));  // dequantises, no quantiser
  EXPECT_FALSE(IsSupportedWeightType(TT::kNVFP4));
  EXPECT_EQ(VecDotType(TT::kIQ4_NL), TT::kQ8_0);
  EXPECT_EQ(VecDotType(TT::kIQ2_XXS), TT::kQ8_K);
  EXPECT_TRUE(IsQuantizableType(TT::kQ8_1));
}

TEST(QuantsDeathTest, RejectsRowsThatAreNotWholeBlocks) {
  std::vector<float> x(48, 1.0f);
  std::vector<uint8_t> buf(64);
  EXPECT_DEATH(QuantizeRow(TT::kQ8_0, x.data(), buf.data(), 48), "block size");
}

// ---- Hand-built blocks ------------------------------------------------------------------------------------

TEST(Quants, DequantizesHandBuiltQ4_0AndQ8_0Blocks) {
  BlockQ4_0 b4;
  b4.d = 0x3800;  // 0.5
  for (int j = 0; j < 16; ++j) b4.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  float y[32];
  DequantizeRow(TT::kQ4_0, &b4, y, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], (j - 8) * 0.5f);
    EXPECT_EQ(y[j + 16], (7 - j) * 0.5f);
  }
  BlockQ8_0 b8;
  b8.d = 0xC000;  // -2
  for (int j = 0; j < 32; ++j) b8.qs[j] = static_cast<int8_t>(j * 8 - 128);
  DequantizeRow(TT::kQ8_0, &b8, y, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], -2.0f * (j * 8 - 128));
}

TEST(Quants, DequantizesHandBuiltQ4_1Q5_0Q5_1Blocks) {
  float y[32];
  BlockQ4_1 a;
  a.d = 0x3C00;  // 1
  a.m = 0xBC00;  // -1
  for (int j = 0; j < 16; ++j) a.qs[j] = static_cast<uint8_t>(0x30 | (j & 0xF));
  DequantizeRow(TT::kQ4_1, &a, y, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], j - 1.0f);
    EXPECT_EQ(y[j + 16], 2.0f);
  }
  // Q5_0: high bits set for elements 0..7 and 16..19 (bit j of qh for j, bit j+16 for j+16).
  BlockQ5_0 b;
  b.d = 0x4000;  // 2
  const uint32_t qh = 0x000F00FFu;
  std::memcpy(b.qh, &qh, 4);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(0x50 | 3);
  DequantizeRow(TT::kQ5_0, &b, y, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], ((j < 8 ? 16 : 0) + 3 - 16) * 2.0f) << j;
    EXPECT_EQ(y[j + 16], ((j < 4 ? 16 : 0) + 5 - 16) * 2.0f) << j;
  }
  BlockQ5_1 c;
  c.d = 0x3800;  // 0.5
  c.m = 0x3C00;  // 1
  std::memcpy(c.qh, &qh, 4);
  for (int j = 0; j < 16; ++j) c.qs[j] = static_cast<uint8_t>(0xF0 | 1);
  DequantizeRow(TT::kQ5_1, &c, y, 32);
  EXPECT_EQ(y[0], 17 * 0.5f + 1);
  EXPECT_EQ(y[8], 1 * 0.5f + 1);
  EXPECT_EQ(y[16], 31 * 0.5f + 1);
  EXPECT_EQ(y[31], 15 * 0.5f + 1);
}

// Packs 6-bit scales/mins as spec section 3.8 describes.
void PackScalesMins(const int* sc, const int* mn, uint8_t* s) {
  for (int j = 0; j < 4; ++j) {
    s[j] = static_cast<uint8_t>((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
    s[j + 4] = static_cast<uint8_t>((mn[j] & 63) | ((mn[j + 4] >> 4) << 6));
    s[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0xF) | ((mn[j + 4] & 0xF) << 4));
  }
}

TEST(Quants, DequantizesHandBuiltQ4_KAndQ5_KBlocks) {
  const int sc[8] = {1, 2, 3, 4, 17, 33, 50, 63};
  const int mn[8] = {0, 1, 2, 63, 20, 40, 5, 63};
  BlockQ4_K b;
  b.d = 0x3800;     // 0.5
  b.dmin = 0x3400;  // 0.25
  PackScalesMins(sc, mn, b.scales);
  for (int j = 0; j < 8; ++j) {
    uint8_t s, m;
    GetScaleMinK4(j, b.scales, &s, &m);
    EXPECT_EQ(s, sc[j]);
    EXPECT_EQ(m, mn[j]);
  }
  for (int i = 0; i < 128; ++i) b.qs[i] = static_cast<uint8_t>((i % 16) | ((15 - i % 16) << 4));
  std::vector<float> y(256);
  DequantizeRow(TT::kQ4_K, &b, y.data(), 256);
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      EXPECT_EQ(y[64 * c + l], 0.5f * sc[2 * c] * (l % 16) - 0.25f * mn[2 * c]);
      EXPECT_EQ(y[64 * c + 32 + l], 0.5f * sc[2 * c + 1] * (15 - l % 16) - 0.25f * mn[2 * c + 1]);
    }
  }
  BlockQ5_K b5;
  b5.d = b.d;
  b5.dmin = b.dmin;
  std::memcpy(b5.scales, b.scales, 12);
  std::memcpy(b5.qs, b.qs, 128);
  for (int l = 0; l < 32; ++l) b5.qh[l] = static_cast<uint8_t>(l % 2 ? 0xAA : 0x55);  // odd l: odd bits
  DequantizeRow(TT::kQ5_K, &b5, y.data(), 256);
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      const int h_lo = l % 2 ? 0 : 16, h_hi = l % 2 ? 16 : 0;
      EXPECT_EQ(y[64 * c + l], 0.5f * sc[2 * c] * (l % 16 + h_lo) - 0.25f * mn[2 * c]);
      EXPECT_EQ(y[64 * c + 32 + l], 0.5f * sc[2 * c + 1] * (15 - l % 16 + h_hi) - 0.25f * mn[2 * c + 1]);
    }
  }
}

TEST(Quants, DequantizesHandBuiltQ6_KBlock) {
  BlockQ6_K b;
  for (int i = 0; i < 128; ++i) b.ql[i] = static_cast<uint8_t>(i);
  for (int i = 0; i < 64; ++i) b.qh[i] = static_cast<uint8_t>(0xE4);  // bit pairs 0,1,2,3 from low to high
  for (int g = 0; g < 16; ++g) b.scales[g] = static_cast<int8_t>(g - 8);
  b.d = 0x3C00;
  std::vector<float> y(256);
  DequantizeRow(TT::kQ6_K, &b, y.data(), 256);
  // Element 128 + 32 + 5: half 1, second quarter, l = 5 -> ql[64 + 32 + 5] low nibble, qh bits 2-3 (= 1),
  // scale Sc[8 + 0 + 2] = 10 - 8 = 2.
  EXPECT_EQ(y[128 + 32 + 5], 2.0f * (((101 & 0xF) | (1 << 4)) - 32));
  // Element 96 + 20: half 0, last quarter, l = 20 -> ql[52] high nibble, qh bits 6-7 (= 3), Sc[1 + 6].
  EXPECT_EQ(y[96 + 20], -1.0f * (((52 >> 4) | (3 << 4)) - 32));
  // Element 0: ql[0] low nibble 0, qh bits 0-1 = 0 -> -32 * Sc[0].
  EXPECT_EQ(y[0], -8.0f * -32);
}

// ---- Quantisers -------------------------------------------------------------------------------------------

TEST(Quants, Q8_0RoundsHalfAwayFromZero) {
  std::vector<float> x(32, 0.0f);
  x[0] = -127.0f;  // amax 127 -> d = 1, id = 1
  x[1] = 2.5f;
  x[2] = -2.5f;
  x[3] = 0.49f;
  x[4] = 126.5f;
  BlockQ8_0 b;
  QuantizeRow(TT::kQ8_0, x.data(), &b, 32);
  EXPECT_EQ(b.d, 0x3C00);
  EXPECT_EQ(b.qs[0], -127);
  EXPECT_EQ(b.qs[1], 3);
  EXPECT_EQ(b.qs[2], -3);
  EXPECT_EQ(b.qs[3], 0);
  EXPECT_EQ(b.qs[4], 127);
  BlockQ8_1 b1;
  QuantizeRow(TT::kQ8_1, x.data(), &b1, 32);
  EXPECT_EQ(b1.d, 0x3C00);
  EXPECT_EQ(b1.s, Fp32ToFp16(-127.0f + 3 - 3 + 127));
}

TEST(Quants, ActivationQ8_0RoundsHalfToEvenLikeLlamaCppOnX86) {
  std::vector<float> x(64, 0.0f);
  x[0] = -127.0f;
  x[1] = 2.5f;
  x[2] = -2.5f;
  x[3] = 3.5f;
  x[4] = 126.5f;
  BlockQ8_0 b[2];
  QuantizeActivationRow(TT::kQ8_0, x.data(), b, 64);
  EXPECT_EQ(b[0].d, 0x3C00);
  EXPECT_EQ(b[0].qs[1], 2);
  EXPECT_EQ(b[0].qs[2], -2);
  EXPECT_EQ(b[0].qs[3], 4);
  EXPECT_EQ(b[0].qs[4], 126);
  EXPECT_EQ(b[1].d, 0);  // all-zero block
  for (int j = 0; j < 32; ++j) EXPECT_EQ(b[1].qs[j], 0);
  BlockQ8_1 c[2];
  QuantizeActivationRow(TT::kQ8_1, x.data(), c, 64);
  EXPECT_EQ(c[0].s, Fp32ToFp16(-127.0f + 2 - 2 + 4 + 126));
  EXPECT_EQ(std::memcmp(c[0].qs, b[0].qs, 32), 0);
}

// llama.cpp's x86 quantize_row_q8_0 written with the same AVX intrinsics: max |x|, 127/max, round, convert.
__attribute__((target("avx2"))) void LlamaX86Q8_0(const float* x, int8_t* q, float* d) {
  __m256 m = _mm256_setzero_ps();
  for (int k = 0; k < 4; ++k) m = _mm256_max_ps(m, _mm256_andnot_ps(_mm256_set1_ps(-0.0f), _mm256_loadu_ps(x + 8 * k)));
  float lanes[8];
  _mm256_storeu_ps(lanes, m);
  float amax = 0;
  for (float v : lanes) amax = std::max(amax, v);
  *d = amax / 127.f;
  const __m256 mul = _mm256_set1_ps(amax != 0.0f ? 127.f / amax : 0.0f);
  for (int k = 0; k < 4; ++k) {
    const __m256i v = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * k), mul), _MM_ROUND_NEAREST));
    int32_t out[8];
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), v);
    for (int l = 0; l < 8; ++l) q[8 * k + l] = static_cast<int8_t>(out[l]);
  }
}

TEST(Quants, ActivationQ8_0MatchesLlamaCppX86Intrinsics) {
  REWIND_SKIP_WITHOUT_AVX2();
  const int64_t n = 32 * 2048;
  std::vector<float> x = RandomRow(n, 31, 0.7f);
  for (int64_t b = 0; b < n / 32; b += 5) {  // blocks with amax 127 and half-integer values: exact ties
    for (int j = 0; j < 32; ++j) x[32 * b + j] = std::round(x[32 * b + j] * 40) / 2;
    x[32 * b + 7] = 127.0f;
  }
  std::vector<BlockQ8_0> got(n / 32);
  QuantizeActivationRow(TT::kQ8_0, x.data(), got.data(), n);
  int differ_from_ref = 0;
  std::vector<BlockQ8_0> ref(n / 32);
  QuantizeRow(TT::kQ8_0, x.data(), ref.data(), n);
  for (int64_t b = 0; b < n / 32; ++b) {
    int8_t q[32];
    float d;
    LlamaX86Q8_0(x.data() + 32 * b, q, &d);
    ASSERT_EQ(got[b].d, Fp32ToFp16(d)) << b;
    ASSERT_EQ(std::memcmp(got[b].qs, q, 32), 0) << b;
    differ_from_ref += std::memcmp(got[b].qs, ref[b].qs, 32) != 0;
  }
  std::printf("  %d of %lld blocks differ from the _ref quantiser\n", differ_from_ref, static_cast<long long>(n / 32));
  EXPECT_GT(differ_from_ref, 0);  // the two roundings really are different functions
}

TEST(Quants, Q8_KRoundsHalfToEvenWithSignedScale) {
  std::vector<float> x(256, 0.0f);
  x[7] = 127.0f;  // largest |x| is positive -> iscale = -1, d = -1
  x[8] = 2.5f;
  x[9] = 3.5f;
  x[10] = -2.5f;
  x[20] = -127.0f;  // same magnitude later: the first one wins
  BlockQ8_K b;
  QuantizeRow(TT::kQ8_K, x.data(), &b, 256);
  EXPECT_EQ(b.d, -1.0f);
  EXPECT_EQ(b.qs[7], -127);
  EXPECT_EQ(b.qs[8], -2);
  EXPECT_EQ(b.qs[9], -4);
  EXPECT_EQ(b.qs[10], 2);
  EXPECT_EQ(b.qs[20], 127);
  EXPECT_EQ(b.bsums[0], -127 - 2 - 4 + 2);
  EXPECT_EQ(b.bsums[1], 127);
  EXPECT_EQ(b.bsums[2], 0);
}

TEST(Quants, ZeroAndNonFiniteInputsDoNotCrash) {
  std::vector<float> zeros(256, 0.0f), bad(256, 1.0f);
  bad[3] = NAN;
  bad[100] = INFINITY;
  bad[200] = -INFINITY;
  for (TT t : {TT::kQ4_0, TT::kQ4_1, TT::kQ5_0, TT::kQ5_1, TT::kQ8_0, TT::kQ8_1, TT::kQ4_K, TT::kQ5_K,
               TT::kQ6_K, TT::kQ8_K, TT::kF16, TT::kBF16}) {
    std::vector<uint8_t> q(RowBytes(t, 256));
    std::vector<float> y(256);
    QuantizeRow(t, zeros.data(), q.data(), 256);
    DequantizeRow(t, q.data(), y.data(), 256);
    for (float v : y) ASSERT_EQ(v, 0.0f) << TypeName(t);
    QuantizeRow(t, bad.data(), q.data(), 256);
    DequantizeRow(t, q.data(), y.data(), 256);
  }
}

struct RoundTripCase {
  TT type;
  double max_rel_rms;  // RMS(dequant(quant(x)) - x) / RMS(x) for N(0,1) data
};

TEST(Quants, RoundTripErrorIsWithinTypeBounds) {
  const RoundTripCase cases[] = {
      {TT::kF16, 0.0005}, {TT::kBF16, 0.004}, {TT::kQ8_0, 0.008}, {TT::kQ8_1, 0.008}, {TT::kQ8_K, 0.008},
      {TT::kQ6_K, 0.03},  {TT::kQ5_K, 0.045}, {TT::kQ5_0, 0.06},  {TT::kQ5_1, 0.06},  {TT::kQ4_K, 0.09},
      {TT::kQ4_0, 0.12},  {TT::kQ4_1, 0.12},  {TT::kF32, 0.0},
  };
  const int64_t n = 4096;
  const auto x = RandomRow(n, 7);
  double ref = 0;
  for (float v : x) ref += double(v) * v;
  for (const auto& c : cases) {
    std::vector<uint8_t> q(RowBytes(c.type, n));
    std::vector<float> y(n);
    QuantizeRow(c.type, x.data(), q.data(), n);
    DequantizeRow(c.type, q.data(), y.data(), n);
    double err = 0;
    for (int64_t i = 0; i < n; ++i) err += (double(y[i]) - x[i]) * (double(y[i]) - x[i]);
    const double rel = std::sqrt(err / ref);
    std::printf("  %-5s relative RMS error %.5f (bound %.5f)\n", TypeName(c.type), rel, c.max_rel_rms);
    EXPECT_LE(rel, c.max_rel_rms) << TypeName(c.type);
  }
}

TEST(Quants, KQuantScaleSearchBeatsPlainMinMax) {
  // The searched Q4_K scales must do better than the naive 4-bit min/max quantiser (Q4_1) on the same data.
  const int64_t n = 8192;
  const auto x = RandomRow(n, 11, 0.02f);
  auto rms = [&](TT t) {
    std::vector<uint8_t> q(RowBytes(t, n));
    std::vector<float> y(n);
    QuantizeRow(t, x.data(), q.data(), n);
    DequantizeRow(t, q.data(), y.data(), n);
    double e = 0;
    for (int64_t i = 0; i < n; ++i) e += (double(y[i]) - x[i]) * (double(y[i]) - x[i]);
    return std::sqrt(e / n);
  };
  EXPECT_LT(rms(TT::kQ4_K), rms(TT::kQ4_1));
  EXPECT_LT(rms(TT::kQ5_K), rms(TT::kQ5_1));
}

// Rows of the llama.cpp fixture model quantised by llama-quantize v0.5.0 (see tests/data/quants/README.md):
// the reference quantisers must reproduce them byte for byte.
TEST(Quants, ReferenceQuantisersReproduceLlamaQuantizeBytes) {
  const std::string path = std::string(REWIND_TEST_DATA) + "/quants/llama_quantize_rows.bin";
  FILE* f = std::fopen(path.c_str(), "rb");
  ASSERT_NE(f, nullptr) << path;
  int tensors = 0;
  uint32_t type;
  while (std::fread(&type, 4, 1, f) == 1) {
    int64_t cols = 0, rows = 0;
    uint64_t name_len = 0;
    ASSERT_EQ(std::fread(&cols, 8, 1, f), 1u);
    ASSERT_EQ(std::fread(&rows, 8, 1, f), 1u);
    ASSERT_EQ(std::fread(&name_len, 8, 1, f), 1u);
    ASSERT_LT(name_len, 256u);
    std::string name(name_len, '\0');
    ASSERT_EQ(std::fread(name.data(), 1, name_len, f), name_len);
    const TT t = static_cast<TT>(type);
    ASSERT_TRUE(IsSupportedWeightType(t));
    std::vector<float> x(cols * rows);
    ASSERT_EQ(std::fread(x.data(), 4, x.size(), f), x.size());
    const size_t rb = RowBytes(t, cols);
    std::vector<uint8_t> expected(rb * rows), got(rb);
    ASSERT_EQ(std::fread(expected.data(), 1, expected.size(), f), expected.size());
    for (int64_t r = 0; r < rows; ++r) {
      QuantizeRow(t, x.data() + r * cols, got.data(), cols);
      EXPECT_EQ(std::memcmp(got.data(), expected.data() + r * rb, rb), 0) << name << " row " << r;
    }
    ++tensors;
  }
  std::fclose(f);
  EXPECT_EQ(tensors, 6);
}

// ---- Reference dot products -------------------------------------------------------------------------------

TEST(Quants, VecDotRefMatchesDotOfDequantizedRows) {
  const TT types[] = {TT::kF32, TT::kF16, TT::kBF16, TT::kQ8_0, TT::kQ4_0, TT::kQ4_1,
                      TT::kQ5_0, TT::kQ5_1, TT::kQ4_K, TT::kQ5_K, TT::kQ6_K};
  for (int64_t n : {256, 1024, 4096}) {
    const auto w = RandomRow(n, 1 + n);
    const auto a = RandomRow(n, 2 + n, 3.0f);
    for (TT t : types) {
      const TT at = VecDotType(t);
      std::vector<uint8_t> wq(RowBytes(t, n)), aq(RowBytes(at, n));
      QuantizeRow(t, w.data(), wq.data(), n);
      QuantizeRow(at, a.data(), aq.data(), n);
      std::vector<float> wd(n), ad(n);
      DequantizeRow(t, wq.data(), wd.data(), n);
      DequantizeRow(at, aq.data(), ad.data(), n);
      double exact = 0, mag = 0, extra = 0;
      for (int64_t i = 0; i < n; ++i) {
        exact += double(wd[i]) * ad[i];
        mag += std::fabs(double(wd[i]) * ad[i]);
      }
      if (at == TT::kQ8_1) {
        // The _1 formats use the stored block sum s = f16(d * sum(q)): allow its rounding (2^-11 relative).
        const auto* ab = reinterpret_cast<const BlockQ8_1*>(aq.data());
        const size_t wb = RowBytes(t, 32);
        for (int64_t b = 0; b < n / 32; ++b) {
          const uint16_t m = *reinterpret_cast<const uint16_t*>(wq.data() + b * wb + 2);
          extra += std::fabs(double(Fp16ToFp32(m)) * Fp16ToFp32(ab[b].s)) / 2048;
        }
      }
      const float got = VecDotRef(t, n, wq.data(), aq.data());
      EXPECT_NEAR(got, exact, 2e-6 * mag + extra + 1e-30) << TypeName(t) << " n=" << n;
    }
  }
}

TEST(Quants, VecDotRefOfHandBuiltQ8_0BlocksIsExact) {
  BlockQ8_0 w[2], a[2];
  for (int b = 0; b < 2; ++b) {
    w[b].d = b ? 0x3800 : 0x4000;  // 0.5, 2
    a[b].d = 0x3C00;               // 1
    for (int j = 0; j < 32; ++j) {
      w[b].qs[j] = static_cast<int8_t>(j - 16);
      a[b].qs[j] = static_cast<int8_t>(b ? 1 : 2);
    }
  }
  // sum(j - 16) = -16; block 0: 2 * 2 * -16 = -64; block 1: 0.5 * 1 * -16 = -8.
  EXPECT_EQ(VecDotRef(TT::kQ8_0, 64, w, a), -72.0f);
}

}  // namespace
}  // namespace rw::gguf
