#include "modelgen/quant_blocks.h"

#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include "base/check.h"
#include "modelgen/rng.h"

namespace rw::modelgen {
namespace {

constexpr int64_t kQK = 256;  // values per K-quant super-block

// A discretised normal over levels 0..L-1 (or 1..L-1 for Q6_K, so it is symmetric around 32), as 16-bit
// thresholds: a uniform 16-bit draw u gives the first level whose threshold exceeds u.
struct LevelTable {
  int first = 0, levels = 0;
  double center = 0, std = 0;   // of the discretised, clipped distribution (in levels)
  std::array<uint32_t, 64> upper{};  // upper[l]: cumulative count (of 65536) up to and including level l
  std::vector<uint8_t> level;        // [65536] the level of each 16-bit draw
};

LevelTable MakeTable(int first, int levels, double sigma) {
  LevelTable t;
  t.first = first;
  t.levels = levels;
  const double c = 0.5 * (first + levels - 1);
  auto cdf = [&](double x) { return 0.5 * std::erfc(-(x - c) / (sigma * std::sqrt(2.0))); };
  double m1 = 0, m2 = 0;
  uint32_t prev = 0;
  for (int l = first; l < levels; ++l) {
    // Tails fold into the end levels; counts rounded from the exact CDF.
    const double hi = l == levels - 1 ? 1.0 : cdf(l + 0.5);
    const uint32_t cum = static_cast<uint32_t>(std::lround(hi * 65536.0));
    t.upper[static_cast<size_t>(l)] = cum;
    const double p = (cum - prev) / 65536.0;
    m1 += p * l;
    m2 += p * l * l;
    prev = cum;
  }
  t.center = m1;
  t.std = std::sqrt(m2 - m1 * m1);
  t.level.resize(65536);
  int l = first;
  for (uint32_t u = 0; u < 65536; ++u) {
    while (l < levels - 1 && u >= t.upper[static_cast<size_t>(l)]) ++l;
    t.level[u] = static_cast<uint8_t>(l);
  }
  return t;
}

const LevelTable& Table(gguf::TensorType type) {
  static const LevelTable q4 = MakeTable(0, 16, 2.5), q5 = MakeTable(0, 32, 5.0), q6 = MakeTable(1, 64, 10.0);
  switch (type) {
    case gguf::TensorType::kQ4_K:
      return q4;
    case gguf::TensorType::kQ5_K:
      return q5;
    default:
      return q6;
  }
}

// n levels drawn from the table, four per 64-bit draw.
void DrawLevels(const LevelTable& t, Rng& rng, uint8_t* q, int n) {
  for (int i = 0; i < n; i += 4) {
    uint64_t r = rng.Next();
    for (int j = 0; j < 4 && i + j < n; ++j, r >>= 16) q[i + j] = t.level[r & 0xFFFF];
  }
}

uint16_t Half(double x) { return std::bit_cast<uint16_t>(static_cast<_Float16>(static_cast<float>(x))); }

void PutHalf(uint8_t* p, double x) {
  const uint16_t h = Half(x);
  std::memcpy(p, &h, 2);
}

}  // namespace

bool DrawsQuantBlocks(gguf::TensorType type, const TensorSpec& t) {
  if (t.init != Init::kNormal || t.std <= 0 || t.ne.empty() || t.ne[0] % kQK != 0) return false;
  switch (type) {
    case gguf::TensorType::kQ4_K:
    case gguf::TensorType::kQ5_K:
      return true;
    case gguf::TensorType::kQ6_K:
      return t.mean == 0;
    default:
      return false;
  }
}

double QuantLevelStd(gguf::TensorType type) { return Table(type).std; }

void RandomQuantRow(gguf::TensorType type, const TensorSpec& t, uint64_t seed, int64_t row, uint8_t* dst, int64_t n) {
  REWIND_CHECK(DrawsQuantBlocks(type, t));
  const LevelTable& tab = Table(type);
  Rng rng(RowSeed(seed, t.name, row));
  // Every sub-block scale (and min) is 1, so a value is d·q − dmin (Q4_K, Q5_K) or d·(q − 32) (Q6_K).
  const double d = t.std / tab.std;
  uint8_t q[kQK];
  for (int64_t b = 0; b < n / kQK; ++b) {
    DrawLevels(tab, rng, q, kQK);
    if (type == gguf::TensorType::kQ6_K) {  // ql[128] qh[64] scales[16] d
      uint8_t* ql = dst;
      uint8_t* qh = dst + 128;
      for (int h = 0; h < 2; ++h)  // two halves of 128 values
        for (int l = 0; l < 32; ++l) {
          const uint8_t* v = q + 128 * h + l;
          ql[64 * h + l] = static_cast<uint8_t>((v[0] & 0xF) | ((v[64] & 0xF) << 4));
          ql[64 * h + l + 32] = static_cast<uint8_t>((v[32] & 0xF) | ((v[96] & 0xF) << 4));
          qh[32 * h + l] = static_cast<uint8_t>((v[0] >> 4) | ((v[32] >> 4) << 2) | ((v[64] >> 4) << 4) | ((v[96] >> 4) << 6));
        }
      std::memset(dst + 192, 1, 16);
      PutHalf(dst + 208, d);
      dst += 210;
      continue;
    }
    // Q4_K: d dmin scales[12] qs[128]; Q5_K: d dmin scales[12] qh[32] qs[128]. dmin makes the mean t.mean.
    PutHalf(dst, d);
    PutHalf(dst + 2, d * tab.center - t.mean);
    std::memset(dst + 4, 1, 8);      // 6-bit scales and mins of sub-blocks 0-3: 1
    std::memset(dst + 12, 0x11, 4);  // low nibbles of sub-blocks 4-7: scale 1, min 1
    const bool q5 = type == gguf::TensorType::kQ5_K;
    uint8_t* qh = dst + 16;
    uint8_t* qs = dst + 16 + (q5 ? 32 : 0);
    if (q5) std::memset(qh, 0, 32);
    for (int j = 0; j < 4; ++j)  // 64 values per pair of sub-blocks: low nibbles, then high nibbles
      for (int l = 0; l < 32; ++l) {
        const uint8_t a = q[64 * j + l], c = q[64 * j + 32 + l];
        qs[32 * j + l] = static_cast<uint8_t>((a & 0xF) | ((c & 0xF) << 4));
        if (q5) qh[l] = static_cast<uint8_t>(qh[l] | ((a >> 4) << (2 * j)) | ((c >> 4) << (2 * j + 1)));
      }
    dst += q5 ? 176 : 144;
  }
}

}  // namespace rw::modelgen
