// Tests of kernels/vec_dot.h: AVX2 vs the scalar twin (tolerance), AVX2 vs AVX2 across call shapes, row
// offsets, alignments and threads (bitwise), and hand-computed dot products.
#include "kernels/vec_dot.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "base/cpu_features_testing.h"
#include "gguf/quants.h"
#include "kernels/ref/vec_dot_ref.h"

#include <immintrin.h>

namespace rw::kernels {
namespace {

using gguf::TensorType;
using TT = TensorType;

const TT kAllTypes[] = {TT::kF32, TT::kF16, TT::kBF16, TT::kQ8_0, TT::kQ4_0, TT::kQ4_1,
                        TT::kQ5_0, TT::kQ5_1, TT::kQ4_K, TT::kQ5_K, TT::kQ6_K};

std::vector<float> Normal(int64_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// Offsets of the f16 scale fields inside one block (bytes), for randomising blocks with sane scales.
std::vector<int> ScaleOffsets(TT t) {
  switch (t) {
    case TT::kQ4_0: case TT::kQ5_0: case TT::kQ8_0: return {0};
    case TT::kQ4_1: case TT::kQ5_1: case TT::kQ4_K: case TT::kQ5_K: return {0, 2};
    case TT::kQ6_K: return {208};
    default: return {};
  }
}

// One weight row of n elements: half of the time quantised from normal data, otherwise random bytes with
// finite scales (exercises every bit pattern of the quants and the packed K-quant scales).
std::vector<uint8_t> WeightRow(TT t, int64_t n, std::mt19937& rng, bool random_bytes) {
  std::vector<uint8_t> row(gguf::RowBytes(t, n));
  if (!random_bytes || t == TT::kF32 || t == TT::kF16 || t == TT::kBF16) {
    const auto x = Normal(n, rng);
    gguf::QuantizeRow(t, x.data(), row.data(), n);
    return row;
  }
  for (auto& b : row) b = static_cast<uint8_t>(rng());
  const int64_t bs = gguf::BlockSize(t);
  const size_t bb = gguf::RowBytes(t, bs);
  std::uniform_real_distribution<float> scale(-0.05f, 0.05f);
  for (int64_t b = 0; b < n / bs; ++b) {
    for (int off : ScaleOffsets(t)) {
      const uint16_t h = gguf::Fp32ToFp16(scale(rng));
      std::memcpy(row.data() + b * bb + off, &h, 2);
    }
  }
  return row;
}

std::vector<uint8_t> ActRow(TT weight_type, int64_t n, std::mt19937& rng) {
  const TT at = gguf::VecDotType(weight_type);
  std::vector<uint8_t> row(gguf::RowBytes(at, n));
  const auto x = Normal(n, rng, 2.0f);
  gguf::QuantizeRow(at, x.data(), row.data(), n);
  return row;
}

// sum |w_i * a_i| of the dequantised rows: the scale of rounding differences.
double Magnitude(TT t, int64_t n, const void* w, const void* a) {
  std::vector<float> wd(n), ad(n);
  gguf::DequantizeRow(t, w, wd.data(), n);
  gguf::DequantizeRow(gguf::VecDotType(t), a, ad.data(), n);
  double m = 0;
  for (int64_t i = 0; i < n; ++i) m += std::fabs(double(wd[i]) * ad[i]);
  return m;
}

std::vector<int64_t> Sizes(TT t) {
  const int64_t bs = gguf::BlockSize(t);
  if (bs == 1) {
    std::vector<int64_t> s;
    for (int64_t n = 0; n <= 80; ++n) s.push_back(n);
    for (int64_t n : {255, 256, 1000, 4096, 4099}) s.push_back(n);
    return s;
  }
  std::vector<int64_t> s;
  for (int64_t nb : {0, 1, 2, 3, 5, 8, 16}) s.push_back(nb * bs);
  if (bs == 32) s.push_back(32 * 128);
  return s;
}

float Fast(TT t, int64_t n, const void* w, const void* a) {
  float out;
  VecDotRowsWith(VecDotImpl::kAvx2, t, n, w, 0, 1, a, &out);
  return out;
}

TEST(VecDot, Avx2MatchesScalarTwinWithinRoundingForEveryTypeAndSize) {
  REWIND_SKIP_WITHOUT_AVX2();
  std::mt19937 rng(123);
  for (TT t : kAllTypes) {
    for (int64_t n : Sizes(t)) {
      for (bool random_bytes : {false, true}) {
        const auto w = WeightRow(t, n, rng, random_bytes);
        const auto a = ActRow(t, n, rng);
        const float fast = Fast(t, n, w.data(), a.data());
        const float ref = ref::VecDot(t, n, w.data(), a.data());
        const double mag = Magnitude(t, n, w.data(), a.data());
        ASSERT_NEAR(fast, ref, 1e-5 * mag + 1e-30)
            << gguf::TypeName(t) << " n=" << n << " random_bytes=" << random_bytes;
      }
    }
  }
}

TEST(VecDot, DispatchedResultEqualsTheActiveImplementation) {
  std::mt19937 rng(5);
  for (TT t : kAllTypes) {
    const int64_t n = 4 * gguf::BlockSize(t) * (gguf::BlockSize(t) == 1 ? 64 : 1);
    const auto w = WeightRow(t, n, rng, false);
    const auto a = ActRow(t, n, rng);
    float via_rows;
    VecDotRowsWith(ActiveVecDotImpl(), t, n, w.data(), 0, 1, a.data(), &via_rows);
    const float direct = VecDot(t, n, w.data(), a.data());
    EXPECT_EQ(std::memcmp(&via_rows, &direct, 4), 0) << gguf::TypeName(t);
  }
}

// Bitwise: one dot computed alone must equal the same row inside any batch, at any row offset, any byte
// misalignment of weights and activations, and any row stride.
TEST(VecDot, Avx2IsBitwiseIdenticalAcrossRowCountsOffsetsAndAlignments) {
  REWIND_SKIP_WITHOUT_AVX2();
  std::mt19937 rng(77);
  constexpr int kRows = 11;
  for (TT t : kAllTypes) {
    const int64_t n = gguf::BlockSize(t) == 1 ? 1000 : 3 * gguf::BlockSize(t);
    const size_t rb = gguf::RowBytes(t, n);
    std::vector<std::vector<uint8_t>> rows;
    for (int r = 0; r < kRows; ++r) rows.push_back(WeightRow(t, n, rng, r % 2 == 1));
    const auto a = ActRow(t, n, rng);
    float alone[kRows];
    for (int r = 0; r < kRows; ++r) alone[r] = Fast(t, n, rows[r].data(), a.data());
    for (size_t w_mis : {0, 1, 3, 7}) {
      for (size_t pad : {0, 5, 64}) {
        const size_t stride = rb + pad;
        std::vector<uint8_t> wbuf(w_mis + stride * kRows);
        for (int r = 0; r < kRows; ++r) std::memcpy(wbuf.data() + w_mis + r * stride, rows[r].data(), rb);
        std::vector<uint8_t> abuf(a.size() + 16);
        const size_t a_mis = (w_mis * 5 + pad) % 9;
        std::memcpy(abuf.data() + a_mis, a.data(), a.size());
        for (int first = 0; first < kRows; ++first) {
          for (int count = 1; first + count <= kRows; ++count) {
            float out[kRows];
            VecDotRowsWith(VecDotImpl::kAvx2, t, n, wbuf.data() + w_mis + first * stride, stride, count,
                           abuf.data() + a_mis, out);
            for (int r = 0; r < count; ++r) {
              ASSERT_EQ(std::memcmp(&out[r], &alone[first + r], 4), 0)
                  << gguf::TypeName(t) << " row " << first + r << " in [" << first << ", +" << count
                  << ") w_mis=" << w_mis << " pad=" << pad;
            }
          }
        }
      }
    }
  }
}

TEST(VecDot, ThreadsSplittingRowsGetTheSameBits) {
  std::mt19937 rng(99);
  for (TT t : {TT::kQ4_K, TT::kQ6_K, TT::kQ8_0, TT::kF16}) {
    const int64_t n = 2 * 256;
    const int rows = 37;
    const size_t rb = gguf::RowBytes(t, n);
    std::vector<uint8_t> w(rb * rows);
    for (int r = 0; r < rows; ++r) {
      const auto row = WeightRow(t, n, rng, false);
      std::memcpy(w.data() + r * rb, row.data(), rb);
    }
    const auto a = ActRow(t, n, rng);
    std::vector<float> one(rows), split(rows);
    VecDotRows(t, n, w.data(), rb, rows, a.data(), one.data());
    std::vector<std::thread> threads;
    const int bounds[] = {0, 3, 4, 17, 30, 37};
    for (int k = 0; k + 1 < 6; ++k) {
      threads.emplace_back([&, k] {
        VecDotRows(t, n, w.data() + bounds[k] * rb, rb, bounds[k + 1] - bounds[k], a.data(),
                   split.data() + bounds[k]);
      });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(std::memcmp(one.data(), split.data(), rows * 4), 0) << gguf::TypeName(t);
  }
}

// Hand-built rows whose exact dot product is an integer representable in float: every implementation must
// get it exactly (checks the integer paths, nibble order, high bits and scale unpacking end to end).
TEST(VecDot, HandBuiltRowsGiveExactIntegers) {
  // Q8_0: weights j - 16 with d = 1, activations all 3 with d = 1: 2 blocks * 3 * sum(j - 16) = -96.
  gguf::BlockQ8_0 w8[2], a8[2];
  for (int b = 0; b < 2; ++b) {
    w8[b].d = a8[b].d = 0x3C00;
    for (int j = 0; j < 32; ++j) {
      w8[b].qs[j] = static_cast<int8_t>(j - 16);
      a8[b].qs[j] = 3;
    }
  }
  // Q4_0: low nibbles 15 (-> 7), high nibbles 0 (-> -8); activations 1 on the first half, 2 on the second:
  // 16 * 7 * 1 + 16 * -8 * 2 = -144 per block.
  gguf::BlockQ4_0 w4[2];
  for (int b = 0; b < 2; ++b) {
    w4[b].d = 0x3C00;
    std::memset(w4[b].qs, 0x0F, 16);
  }
  gguf::BlockQ8_0 a4[2];
  for (int b = 0; b < 2; ++b) {
    a4[b].d = 0x3C00;
    for (int j = 0; j < 32; ++j) a4[b].qs[j] = static_cast<int8_t>(j < 16 ? 1 : 2);
  }
  // Q4_K: d = 1, dmin = 1, all scales 2, all mins 1, all quants 15; activations 1 with d = 1:
  // 256 * (2 * 15) - 1 * 256 = 7424.
  gguf::BlockQ4_K wk;
  wk.d = wk.dmin = 0x3C00;
  for (int j = 0; j < 4; ++j) {
    wk.scales[j] = 2;
    wk.scales[j + 4] = 1;
    wk.scales[j + 8] = 0x12;
  }
  std::memset(wk.qs, 0xFF, 128);
  gguf::BlockQ8_K ak;
  ak.d = 1.0f;
  for (int j = 0; j < 256; ++j) ak.qs[j] = 1;
  for (int g = 0; g < 16; ++g) ak.bsums[g] = 16;
  // Q6_K: all quants 63 (-> 31), scales g - 8, d = 1: sum_g 16 * 31 * (g - 8) = 496 * -8 = -3968.
  gguf::BlockQ6_K w6;
  std::memset(w6.ql, 0xFF, 128);
  std::memset(w6.qh, 0xFF, 64);
  for (int g = 0; g < 16; ++g) w6.scales[g] = static_cast<int8_t>(g - 8);
  w6.d = 0x3C00;

  struct Case {
    TT t;
    int64_t n;
    const void* w;
    const void* a;
    float expected;
  } cases[] = {
      {TT::kQ8_0, 64, w8, a8, -96.0f},
      {TT::kQ4_0, 64, w4, a4, -288.0f},
      {TT::kQ4_K, 256, &wk, &ak, 7424.0f},
      {TT::kQ6_K, 256, &w6, &ak, -3968.0f},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(ref::VecDot(c.t, c.n, c.w, c.a), c.expected) << gguf::TypeName(c.t);
    EXPECT_EQ(VecDot(c.t, c.n, c.w, c.a), c.expected) << gguf::TypeName(c.t);
  }
}

// llama.cpp's summation orders, written independently with intrinsics: the AVX2 kernels must reproduce them
// bit for bit (these are the orders behind the golden files).
__attribute__((target("avx2,fma,f16c"))) float HsumTiny(__m256 x) {  // tinyBLAS / ggml hsum
  __m128 v = _mm_add_ps(_mm256_extractf128_ps(x, 1), _mm256_castps256_ps128(x));
  v = _mm_add_ps(v, _mm_movehl_ps(v, v));
  v = _mm_add_ss(v, _mm_movehdup_ps(v));
  return _mm_cvtss_f32(v);
}
__attribute__((target("avx2,fma,f16c"))) float TinyBlasF16(const uint16_t* w, const uint16_t* a, int64_t n) {
  __m256 c = _mm256_setzero_ps();
  for (int64_t l = 0; l < n; l += 8) {
    c = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + l))),
                        _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + l))), c);
  }
  return HsumTiny(c);
}
__attribute__((target("avx2,fma,f16c"))) float LlamaQ8_0(const gguf::BlockQ8_0* x, const gguf::BlockQ8_0* y,
                                                          int64_t nb) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const __m256 d = _mm256_set1_ps(gguf::Fp16ToFp32(x[i].d) * gguf::Fp16ToFp32(y[i].d));
    const __m256i qx = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].qs));
    const __m256i qy = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].qs));
    const __m256i dot = _mm256_maddubs_epi16(_mm256_sign_epi8(qx, qx), _mm256_sign_epi8(qy, qx));
    const __m256 q = _mm256_cvtepi32_ps(_mm256_madd_epi16(dot, _mm256_set1_epi16(1)));
    acc = _mm256_fmadd_ps(d, q, acc);
  }
  return HsumTiny(acc);
}

TEST(VecDot, Avx2ReproducesLlamaCppSummationOrderForF16AndQ8_0) {
  REWIND_SKIP_WITHOUT_AVX2();
  std::mt19937 rng(8);
  for (int64_t n : {256, 1024, 4096}) {
    const auto w16 = WeightRow(TT::kF16, n, rng, false);
    const auto a16 = ActRow(TT::kF16, n, rng);
    const float want16 = TinyBlasF16(reinterpret_cast<const uint16_t*>(w16.data()),
                                     reinterpret_cast<const uint16_t*>(a16.data()), n);
    const float got16 = Fast(TT::kF16, n, w16.data(), a16.data());
    EXPECT_EQ(std::memcmp(&want16, &got16, 4), 0) << "F16 n=" << n << " " << want16 << " vs " << got16;
    const auto w8 = WeightRow(TT::kQ8_0, n, rng, false);
    const auto a8 = ActRow(TT::kQ8_0, n, rng);
    const float want8 = LlamaQ8_0(reinterpret_cast<const gguf::BlockQ8_0*>(w8.data()),
                                  reinterpret_cast<const gguf::BlockQ8_0*>(a8.data()), n / 32);
    const float got8 = Fast(TT::kQ8_0, n, w8.data(), a8.data());
    EXPECT_EQ(std::memcmp(&want8, &got8, 4), 0) << "Q8_0 n=" << n << " " << want8 << " vs " << got8;
  }
}

TEST(VecDotDeathTest, RejectsRowsThatAreNotWholeBlocks) {
  std::vector<uint8_t> w(1024), a(1024);
  EXPECT_DEATH(VecDot(TT::kQ4_K, 300, w.data(), a.data()), "multiple");
  EXPECT_DEATH(VecDot(TT::kQ8_K, 256, w.data(), a.data()), "unsupported");
}

TEST(VecDot, ExtremeQuantsDoNotSaturate) {
  REWIND_SKIP_WITHOUT_AVX2();
  // Activations at +-127 and weights at their extreme codes, where 16-bit intermediate sums are closest to
  // overflowing: fast and scalar must still agree to rounding.
  std::mt19937 rng(4);
  for (TT t : kAllTypes) {
    if (gguf::BlockSize(t) == 1) continue;
    const int64_t n = 2 * 256;
    auto w = WeightRow(t, n, rng, true);
    for (size_t i = 0; i < w.size(); ++i) w[i] |= (i % 3 == 0) ? 0xFF : 0x00;
    // restore finite scales
    const size_t bb = gguf::RowBytes(t, gguf::BlockSize(t));
    for (size_t b = 0; b < w.size() / bb; ++b) {
      for (int off : ScaleOffsets(t)) {
        const uint16_t h = gguf::Fp32ToFp16(0.01f);
        std::memcpy(w.data() + b * bb + off, &h, 2);
      }
    }
    std::vector<float> x(n);
    for (int64_t i = 0; i < n; ++i) x[i] = (i % 5 == 0) ? -1.0f : 1.0f;
    std::vector<uint8_t> a(gguf::RowBytes(gguf::VecDotType(t), n));
    gguf::QuantizeRow(gguf::VecDotType(t), x.data(), a.data(), n);
    const double mag = Magnitude(t, n, w.data(), a.data());
    EXPECT_NEAR(Fast(t, n, w.data(), a.data()), ref::VecDot(t, n, w.data(), a.data()), 1e-5 * mag)
        << gguf::TypeName(t);
  }
}

}  // namespace
}  // namespace rw::kernels
