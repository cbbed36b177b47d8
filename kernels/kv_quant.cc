#include "kernels/kv_quant.h"

#include <immintrin.h>

#include <cctype>
#include <cmath>
#include <cstring>
#include <iterator>

#include "base/check.h"
#include "base/cpu_features.h"
#include "gguf/quants.h"
#include "kernels/f16_row.h"

namespace rw::kernels {
namespace {

// IQ4_NL: 32 elements, an F16 scale and 4-bit indices into a fixed non-linear table (llama.cpp's
// kvalues_iq4nl); element j < 16 in the low nibble of qs[j], element j + 16 in its high nibble.
struct __attribute__((packed)) BlockIq4Nl {
  uint16_t d;
  uint8_t qs[16];
};
static_assert(sizeof(BlockIq4Nl) == 18);
constexpr int8_t kIq4NlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                     1,    13,   25,  38,  53,  69,  89,  113};
constexpr int kBlock = 32;

// Name and GGUF block format of each type, indexed by the enum's value.
struct TypeInfo {
  KvType type;
  const char* name;
  gguf::TensorType tensor_type;
};
constexpr TypeInfo kTypes[] = {
    {KvType::kF32, "f32", gguf::TensorType::kF32},         {KvType::kF16, "f16", gguf::TensorType::kF16},
    {KvType::kBF16, "bf16", gguf::TensorType::kBF16},      {KvType::kQ8_0, "q8_0", gguf::TensorType::kQ8_0},
    {KvType::kQ5_1, "q5_1", gguf::TensorType::kQ5_1},      {KvType::kQ5_0, "q5_0", gguf::TensorType::kQ5_0},
    {KvType::kQ4_1, "q4_1", gguf::TensorType::kQ4_1},      {KvType::kQ4_0, "q4_0", gguf::TensorType::kQ4_0},
    {KvType::kIQ4_NL, "iq4_nl", gguf::TensorType::kIQ4_NL}};

const TypeInfo& Info(KvType t) {
  const auto i = static_cast<size_t>(t);
  REWIND_CHECK_MSG(i < std::size(kTypes) && kTypes[i].type == t, "bad KV type %d", static_cast<int>(t));
  return kTypes[i];
}

gguf::TensorType TensorTypeOf(KvType t) { return Info(t).tensor_type; }

// The table index nearest to x (ties to the upper index unless x is strictly closer to the lower), as
// llama.cpp's best_index_int8 decides it: a bisection over the sorted table, then one comparison.
int NearestIq4Index(float x) {
  if (x <= kIq4NlValues[0]) return 0;
  if (x >= kIq4NlValues[15]) return 15;
  int lo = 0, hi = 15;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (x < kIq4NlValues[mid])
      hi = mid;
    else
      lo = mid;
  }
  return x - kIq4NlValues[hi - 1] < kIq4NlValues[hi] - x ? hi - 1 : hi;
}

// quantize_row_iq4_nl_ref: one 32-element block, no importance weights (weights x²), no scale search: the
// scale max/-127 picks the indices, then the least-squares scale for those indices is stored. A block whose
// largest magnitude is below 1e-15 gets scale 0 (its indices are 0 here; llama.cpp leaves them unset).
void QuantizeIq4NlBlock(const float* x, BlockIq4Nl* y) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < kBlock; ++j) {
    const float ax = std::fabs(x[j]);
    if (ax > amax) {
      amax = ax;
      max = x[j];
    }
  }
  uint8_t idx[kBlock] = {};
  float d = 0.0f;
  if (amax >= 1e-15f) {
    const float id = 1.0f / (max / kIq4NlValues[0]);
    float sumqx = 0.0f, sumq2 = 0.0f;
    for (int j = 0; j < kBlock; ++j) {
      const int l = NearestIq4Index(id * x[j]);
      idx[j] = static_cast<uint8_t>(l);
      const float q = kIq4NlValues[l];
      const float w = x[j] * x[j];
      const float wq = w * q;
      sumqx += wq * x[j];
      sumq2 += wq * q;
    }
    d = sumq2 > 0 ? sumqx / sumq2 : 0.0f;
  }
  y->d = gguf::Fp32ToFp16(d);
  for (int j = 0; j < 16; ++j) y->qs[j] = static_cast<uint8_t>(idx[j] | (idx[j + 16] << 4));
}

void DequantizeIq4NlRef(const BlockIq4Nl* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kBlock) {
    const float d = gguf::Fp16ToFp32(x[i].d);
    for (int j = 0; j < 16; ++j) {
      y[j] = d * kIq4NlValues[x[i].qs[j] & 0x0F];
      y[j + 16] = d * kIq4NlValues[x[i].qs[j] >> 4];
    }
  }
}

// ---- AVX2 dequantisation (no FMA: d·q + m is a multiply, then an add, as in the scalar twin) --------------

// y[0..32) = float(q[i]) · d for 32 signed bytes q in element order.
__attribute__((target("avx2"))) inline void StoreScaled(__m256i q, __m256 d, float* y) {
  const __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
  _mm256_storeu_ps(y + 0, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo)), d));
  _mm256_storeu_ps(y + 8, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8))), d));
  _mm256_storeu_ps(y + 16, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi)), d));
  _mm256_storeu_ps(y + 24, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8))), d));
}

// y[0..32) = float(q[i]) · d + m.
__attribute__((target("avx2"))) inline void StoreScaledMin(__m256i q, __m256 d, __m256 m, float* y) {
  const __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
  const __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
  for (int k = 0; k < 4; ++k)
    _mm256_storeu_ps(y + 8 * k,
                     _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(parts[k])), d), m));
}

// The 32 nibbles of 16 bytes in element order: low nibbles (elements 0..15), then high nibbles (16..31).
__attribute__((target("avx2"))) inline __m256i Nibbles(const uint8_t* qs) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i mask = _mm_set1_epi8(0x0F);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(b, 4), mask), _mm_and_si128(b, mask));
}

// Byte j = 0x10 where bit j of the 32-bit qh is set, else 0 (the fifth bit of the Q5 quants).
__attribute__((target("avx2"))) inline __m256i FifthBits(const uint8_t* qh) {
  uint32_t bits;
  std::memcpy(&bits, qh, 4);
  // Byte j takes byte j / 8 of qh, then keeps its bit j % 8.
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(bits)),
      _mm256_setr_epi64x(0x0000000000000000, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303));
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
  return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

__attribute__((target("avx2"))) inline __m256 Scale(uint16_t h) {
  return _mm256_set1_ps(gguf::Fp16ToFp32(h));
}

__attribute__((target("avx2"))) void DequantizeAvx2(KvType t, const void* src, float* y, int64_t nb) {
  const uint8_t* p = static_cast<const uint8_t*>(src);
  switch (t) {
    case KvType::kQ8_0:
      for (int64_t i = 0; i < nb; ++i, y += kBlock) {
        const auto* b = reinterpret_cast<const gguf::BlockQ8_0*>(p + i * sizeof(gguf::BlockQ8_0));
        StoreScaled(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qs)), Scale(b->d), y);
      }
      return;
    case KvType::kQ4_0:
      for (int64_t i = 0; i < nb; ++i, y += kBlock) {
        const auto* b = reinterpret_cast<const gguf::BlockQ4_0*>(p + i * sizeof(gguf::BlockQ4_0));
        StoreScaled(_mm256_sub_epi8(Nibbles(b->qs), _mm256_set1_epi8(8)), Scale(b->d), y);
      }
      return;
    case KvType::kQ4_1:
      for (int64_t i = 0; i < nb; ++i, y += kBlock) {
        const auto* b = reinterpret_cast<const gguf::BlockQ4_1*>(p + i * sizeof(gguf::BlockQ4_1));
        StoreScaledMin(Nibbles(b->qs), Scale(b->d), Scale(b->m), y);
      }
      return;
    case KvType::kQ5_0:
      for (int64_t i = 0; i < nb; ++i, y += kBlock) {
        const auto* b = reinterpret_cast<const gguf::BlockQ5_0*>(p + i * sizeof(gguf::BlockQ5_0));
        const __m256i q = _mm256_or_si256(Nibbles(b->qs), FifthBits(b->qh));
        StoreScaled(_mm256_sub_epi8(q, _mm256_set1_epi8(16)), Scale(b->d), y);
      }
      return;
    case KvType::kQ5_1:
      for (int64_t i = 0; i < nb; ++i, y += kBlock) {
        const auto* b = reinterpret_cast<const gguf::BlockQ5_1*>(p + i * sizeof(gguf::BlockQ5_1));
        StoreScaledMin(_mm256_or_si256(Nibbles(b->qs), FifthBits(b->qh)), Scale(b->d), Scale(b->m), y);
      }
      return;
    case KvType::kIQ4_NL: {
      const __m128i table = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4NlValues));
      const __m256i table2 = _mm256_set_m128i(table, table);
      for (int64_t i = 0; i < nb; ++i, y += kBlock) {
        const auto* b = reinterpret_cast<const BlockIq4Nl*>(p + i * sizeof(BlockIq4Nl));
        StoreScaled(_mm256_shuffle_epi8(table2, Nibbles(b->qs)), Scale(b->d), y);
      }
      return;
    }
    case KvType::kBF16: {
      const uint16_t* h = static_cast<const uint16_t*>(src);
      const int64_t n = nb;  // elements (block size 1)
      int64_t j = 0;
      for (; j + 8 <= n; j += 8) {
        const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + j)));
        _mm256_storeu_ps(y + j, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
      }
      for (; j < n; ++j) y[j] = gguf::Bf16ToFp32(h[j]);
      return;
    }
    default:
      break;
  }
  REWIND_CHECK_MSG(false, "no AVX2 dequantisation for KV type %d", static_cast<int>(t));
}

const bool kHasAvx2 = CpuHasAvx2FmaF16c();

}  // namespace

std::string_view KvTypeName(KvType t) { return Info(t).name; }

gguf::TensorType KvTensorType(KvType t) { return TensorTypeOf(t); }

std::string KvTypesName(KvTypes t) {
  if (t.k == t.v) return std::string(KvTypeName(t.k));
  return std::string(KvTypeName(t.k)) + "/" + std::string(KvTypeName(t.v));
}

std::string KvTypeList() {
  std::string out;
  for (KvType t : kAllKvTypes) out += (out.empty() ? "" : ", ") + std::string(KvTypeName(t));
  return out;
}

Expected<KvType> ParseKvType(std::string_view name) {
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (KvType t : kAllKvTypes)
    if (lower == KvTypeName(t)) return t;
  return Error::InvalidArgument("unknown KV cache type '" + std::string(name) +
                                "' (allowed: " + KvTypeList() + ")");
}

int32_t KvBlockElems(KvType t) {
  return t == KvType::kF32 || t == KvType::kF16 || t == KvType::kBF16 ? 1 : kBlock;
}

size_t KvRowBytes(KvType t, int64_t n) {
  if (t == KvType::kIQ4_NL) {
    REWIND_CHECK_MSG(n >= 0 && n % kBlock == 0, "IQ4_NL row of %lld elements", static_cast<long long>(n));
    return static_cast<size_t>(n / kBlock) * sizeof(BlockIq4Nl);
  }
  return gguf::RowBytes(TensorTypeOf(t), n);
}

double KvBytesPerElement(KvType t) { return static_cast<double>(KvRowBytes(t, kBlock)) / kBlock; }

void QuantizeKvRow(KvType t, const float* src, void* dst, int64_t n) {
  switch (t) {
    case KvType::kF16:
      return FloatToHalfRow(src, static_cast<uint16_t*>(dst), n);  // same bits as the scalar
    case KvType::kIQ4_NL: {
      REWIND_CHECK_MSG(n % kBlock == 0, "IQ4_NL row of %lld elements", static_cast<long long>(n));
      auto* y = static_cast<BlockIq4Nl*>(dst);
      for (int64_t i = 0; i < n / kBlock; ++i) QuantizeIq4NlBlock(src + i * kBlock, y + i);
      return;
    }
    default:
      return gguf::QuantizeRow(TensorTypeOf(t), src, dst, n);
  }
}

void DequantizeKvRow(KvType t, const void* src, float* dst, int64_t n) {
  switch (t) {
    case KvType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case KvType::kF16:
      return HalfToFloatRow(static_cast<const uint16_t*>(src), dst, n);
    default:
      break;
  }
  if (!kHasAvx2) return ref::DequantizeKvRow(t, src, dst, n);
  const int64_t per = KvBlockElems(t);
  REWIND_CHECK_MSG(n % per == 0, "KV row of %lld elements", static_cast<long long>(n));
  DequantizeAvx2(t, src, dst, n / per);
}

int32_t KvRotationSize(KvType t, int32_t head_dim, bool is_k) {
  if (KvBlockElems(t) == 1 || head_dim <= 0 || head_dim % 64 != 0) return 0;
  if (!is_k) return 64;
  int32_t size = 64;
  while (head_dim % (2 * size) == 0) size *= 2;
  return size;
}

void HadamardRotate(float* x, int64_t n, int32_t size) {
  REWIND_CHECK(size > 0 && (size & (size - 1)) == 0 && n % size == 0);
  const float scale = 1.0f / std::sqrt(static_cast<float>(size));
  for (int64_t c = 0; c < n; c += size) {
    float* y = x + c;
    for (int32_t j = 0; j < size; ++j) y[j] *= scale;
    for (int32_t len = 1; len < size; len <<= 1)
      for (int32_t i = 0; i < size; i += 2 * len)
        for (int32_t j = i; j < i + len; ++j) {
          const float u = y[j], v = y[j + len];
          y[j] = u + v;
          y[j + len] = u - v;
        }
  }
}

namespace ref {

void DequantizeKvRow(KvType t, const void* src, float* dst, int64_t n) {
  if (t == KvType::kIQ4_NL) {
    REWIND_CHECK_MSG(n % kBlock == 0, "IQ4_NL row of %lld elements", static_cast<long long>(n));
    return DequantizeIq4NlRef(static_cast<const BlockIq4Nl*>(src), dst, n / kBlock);
  }
  gguf::DequantizeRow(TensorTypeOf(t), src, dst, n);
}

}  // namespace ref

}  // namespace rw::kernels
