// Element types of the attention KV cache, spelled as llama-server's -ctk / -ctv spell them, and the row
// conversions between them and float. A cached K or V row of n = Hkv·D elements is stored as n / block blocks
// of the type's GGUF block format (gguf/quants.h); every block depends on its own 32 floats only, so a
// quantised row is a function of that row alone (I1: prefill in any split writes the same bytes as token by
// token).
//
// Quantisation is bit-identical to llama.cpp v0.5.0's quantize_row_*_ref (F16 and BF16 round to nearest
// even). Dequantisation is exact arithmetic per element (d·q, or d·q + m for the _1 types; one rounding
// each), so the AVX2 path and the scalar twin give the same bits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "base/expected.h"
#include "gguf/types.h"

namespace rw::kernels {

enum class KvType : uint8_t { kF32, kF16, kBF16, kQ8_0, kQ5_1, kQ5_0, kQ4_1, kQ4_0, kIQ4_NL };

// Every type, in llama-server's order of its --cache-type-k help.
inline constexpr KvType kAllKvTypes[] = {KvType::kF32,  KvType::kF16,  KvType::kBF16,
                                         KvType::kQ8_0, KvType::kQ5_1, KvType::kQ5_0,
                                         KvType::kQ4_1, KvType::kQ4_0, KvType::kIQ4_NL};

// The K and V types of one cache (llama-server lets them differ). Converts from one type for both.
struct KvTypes {
  KvType k = KvType::kF16;
  KvType v = KvType::kF16;
  constexpr KvTypes() = default;
  constexpr KvTypes(KvType both)
      : k(both), v(both) {}  // NOLINT(google-explicit-constructor): f16 means f16/f16
  constexpr KvTypes(KvType k_type, KvType v_type) : k(k_type), v(v_type) {}
  friend constexpr bool operator==(KvTypes a, KvTypes b) { return a.k == b.k && a.v == b.v; }
};

// "f32", "f16", "bf16", "q8_0", "q5_1", "q5_0", "q4_1", "q4_0", "iq4_nl".
std::string_view KvTypeName(KvType t);
// "q8_0/f16" (K/V); one name when both are the same.
std::string KvTypesName(KvTypes t);
// Parses a name as above (case-insensitive); the error lists the accepted names.
Expected<KvType> ParseKvType(std::string_view name);
// "all types: f32, f16, ..." for help lines.
std::string KvTypeList();

// The GGUF tensor type whose block format a cached row of type t is stored in (IQ4_NL's block is GGUF's too).
gguf::TensorType KvTensorType(KvType t);

// Elements per block: 1 for F32/F16/BF16, 32 for the quantised types. A row must be whole blocks, and so must
// every head inside it (D % KvBlockElems == 0).
int32_t KvBlockElems(KvType t);
// Bytes of n elements (n a multiple of KvBlockElems; checked).
size_t KvRowBytes(KvType t, int64_t n);
// Bytes per element as a fraction (row bytes of one 32-element block / 32), for reports: 4, 2, 2, 1.0625, ...
double KvBytesPerElement(KvType t);

// dst = the row of n floats in type t (n a multiple of KvBlockElems). Pointers need no alignment.
void QuantizeKvRow(KvType t, const float* src, void* dst, int64_t n);
// dst = the floats of a row of n elements of type t. The fast path (AVX2 or F16C when the CPU has them).
void DequantizeKvRow(KvType t, const void* src, float* dst, int64_t n);

// Rotation of the quantised caches (llama.cpp v0.5.0 does it, so its quantised-KV numerics include it): when
// K is a block type and the head dim D is a multiple of 64, every K head and every query head is multiplied
// by the orthonormal Walsh-Hadamard matrix of size KvRotationSize (the largest power of two >= 64 dividing D,
// in chunks of that size); when V is a block type, every V head is rotated in chunks of 64 and each attention
// output head rotated back (the matrix is its own inverse). Scores are unchanged in exact arithmetic; the
// quantisation error is spread evenly over a head instead of following its outliers. 0: no rotation.
int32_t KvRotationSize(KvType t, int32_t head_dim, bool is_k);
// x[0..n) = H·x per consecutive chunk of `size` elements (size a power of two dividing n): each element
// scaled by 1/sqrt(size), then butterfly passes (u + v, u - v) of widths 1, 2, 4, ...: the bits of
// llama.cpp's ggml_compute_forward_fwht (each output is one fixed sequence of additions).
void HadamardRotate(float* x, int64_t n, int32_t size);

namespace ref {
// The scalar twin of DequantizeKvRow: the same bits, one element at a time.
void DequantizeKvRow(KvType t, const void* src, float* dst, int64_t n);
}  // namespace ref

}  // namespace rw::kernels
