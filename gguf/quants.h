// Quantised block formats: fp16/bf16 conversion, row (de)quantisation and scalar reference dot products.
// Layouts and numerics: ../shared/spec/gguf-and-quants.md sections 3 and 4 (llama.cpp v0.5.0 is the reference).
//
// A matmul y = W x with a quantised W first converts the activation row x to VecDotType(W.type) with
// QuantizeActivationRow, then each output element is VecDotRef(W.type, n, w_row, x_q) (or the fast kernel in
// kernels/vec_dot.h, which computes the same integer sums with a different, fixed float summation order).
#pragma once

#include <cstddef>
#include <cstdint>

#include "gguf/types.h"

namespace rw::gguf {

// ---- fp16 / bf16 ------------------------------------------------------------------------------------------
// Fp16ToFp32 is exact (subnormals, inf; a NaN stays NaN with its payload, quietened as x86 F16C does). Fp32ToFp16 rounds to nearest even; overflow gives
// inf; NaN gives a quiet NaN with the sign and the top 10 payload bits kept (what x86 F16C does).
float Fp16ToFp32(uint16_t h);
uint16_t Fp32ToFp16(float f);
// Bf16ToFp32: bits << 16. Fp32ToBf16: round to nearest even; NaN -> (bits >> 16) | 0x40 (quiet).
float Bf16ToFp32(uint16_t h);
uint16_t Fp32ToBf16(float f);

void Fp16ToFp32Row(const uint16_t* src, float* dst, int64_t n);
void Fp32ToFp16Row(const float* src, uint16_t* dst, int64_t n);
void Bf16ToFp32Row(const uint16_t* src, float* dst, int64_t n);
void Fp32ToBf16Row(const float* src, uint16_t* dst, int64_t n);

// ---- Block layouts (little-endian; sizes checked below) ---------------------------------------------------
// Packed (alignment 1): rows inside a GGUF mapping start at any byte offset, e.g. 18-byte Q4_0 blocks.
#define REWIND_PACKED __attribute__((packed))
inline constexpr int kQK = 32;    // elements per block of the _0/_1 formats
inline constexpr int kQK_K = 256; // elements per super-block of the K formats

struct REWIND_PACKED BlockQ4_0 { uint16_t d; uint8_t qs[16]; };
struct REWIND_PACKED BlockQ4_1 { uint16_t d, m; uint8_t qs[16]; };
struct REWIND_PACKED BlockQ5_0 { uint16_t d; uint8_t qh[4]; uint8_t qs[16]; };
struct REWIND_PACKED BlockQ5_1 { uint16_t d, m; uint8_t qh[4]; uint8_t qs[16]; };
struct REWIND_PACKED BlockQ8_0 { uint16_t d; int8_t qs[32]; };
struct REWIND_PACKED BlockQ8_1 { uint16_t d, s; int8_t qs[32]; };  // s = f16(d * sum(qs))
struct REWIND_PACKED BlockQ4_K { uint16_t d, dmin; uint8_t scales[12]; uint8_t qs[128]; };
struct REWIND_PACKED BlockQ5_K { uint16_t d, dmin; uint8_t scales[12]; uint8_t qh[32]; uint8_t qs[128]; };
struct REWIND_PACKED BlockQ6_K { uint8_t ql[128]; uint8_t qh[64]; int8_t scales[16]; uint16_t d; };
struct REWIND_PACKED BlockQ8_K { float d; int8_t qs[256]; int16_t bsums[16]; };

static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24 && sizeof(BlockQ8_0) == 34 && sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockQ4_K) == 144 && sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ8_K) == 292);

// Low-bit and non-linear formats (spec: llama.cpp v0.5.0 ggml-common.h). 16-bit fields inside byte arrays are
// read with memcpy (little-endian). Dequantisation and the integer form of a block: gguf/quants_lowbit.h.
struct REWIND_PACKED BlockQ2_K { uint8_t scales[16]; uint8_t qs[64]; uint16_t d, dmin; };
struct REWIND_PACKED BlockQ3_K { uint8_t hmask[32]; uint8_t qs[64]; uint8_t scales[12]; uint16_t d; };
struct REWIND_PACKED BlockTQ1_0 { uint8_t qs[48]; uint8_t qh[4]; uint16_t d; };
struct REWIND_PACKED BlockTQ2_0 { uint8_t qs[64]; uint16_t d; };
struct REWIND_PACKED BlockIQ2_XXS { uint16_t d; uint8_t qs[64]; };  // 32 x uint16
struct REWIND_PACKED BlockIQ2_XS { uint16_t d; uint8_t qs[64]; uint8_t scales[8]; };  // qs: 32 x uint16
struct REWIND_PACKED BlockIQ2_S { uint16_t d; uint8_t qs[64]; uint8_t qh[8]; uint8_t scales[8]; };
struct REWIND_PACKED BlockIQ3_XXS { uint16_t d; uint8_t qs[96]; };
struct REWIND_PACKED BlockIQ3_S { uint16_t d; uint8_t qs[64]; uint8_t qh[8]; uint8_t signs[32]; uint8_t scales[4]; };
struct REWIND_PACKED BlockIQ1_S { uint16_t d; uint8_t qs[32]; uint8_t qh[16]; };  // qh: 8 x uint16
struct REWIND_PACKED BlockIQ1_M { uint8_t qs[32]; uint8_t qh[16]; uint8_t scales[8]; };
struct REWIND_PACKED BlockIQ4_NL { uint16_t d; uint8_t qs[16]; };
struct REWIND_PACKED BlockIQ4_XS { uint16_t d, scales_h; uint8_t scales_l[4]; uint8_t qs[128]; };
struct REWIND_PACKED BlockMXFP4 { uint8_t e; uint8_t qs[16]; };  // e: E8M0 shared exponent

static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110 && sizeof(BlockTQ1_0) == 54);
static_assert(sizeof(BlockTQ2_0) == 66 && sizeof(BlockIQ2_XXS) == 66 && sizeof(BlockIQ2_XS) == 74);
static_assert(sizeof(BlockIQ2_S) == 82 && sizeof(BlockIQ3_XXS) == 98 && sizeof(BlockIQ3_S) == 110);
static_assert(sizeof(BlockIQ1_S) == 50 && sizeof(BlockIQ1_M) == 56 && sizeof(BlockIQ4_NL) == 18);
static_assert(sizeof(BlockIQ4_XS) == 136 && sizeof(BlockMXFP4) == 17);

// Six-bit scale/min unpack of Q4_K / Q5_K sub-block j (0..7), spec section 3.8.
inline void GetScaleMinK4(int j, const uint8_t* scales, uint8_t* sc, uint8_t* mn) {
  if (j < 4) {
    *sc = scales[j] & 63;
    *mn = scales[j + 4] & 63;
  } else {
    *sc = (scales[j + 4] & 0x0F) | ((scales[j - 4] >> 6) << 4);
    *mn = (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4);
  }
}

// ---- Types ------------------------------------------------------------------------------------------------
// Weight types with dequantisation and dot products: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K,
// Q6_K (these also quantise) and the low-bit types of gguf/quants_lowbit.h (Q2_K, Q3_K, IQ1_S, IQ1_M, IQ2_XXS,
// IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ4_NL, IQ4_XS, TQ1_0, TQ2_0, MXFP4: dequantisation and dot products only).
bool IsSupportedWeightType(TensorType t);
// Types QuantizeRow accepts: the weight types with a quantiser plus the activation types Q8_1 and Q8_K.
// DequantizeRow accepts these and every supported weight type.
bool IsQuantizableType(TensorType t);
// The activation format a weight type dots against (spec section 4): F32->F32, F16->F16, BF16->BF16,
// Q4_0/Q5_0/Q8_0/IQ4_NL/MXFP4->Q8_0, Q4_1/Q5_1->Q8_1, K-quants, IQ1-3, IQ4_XS and TQ->Q8_K. Aborts for an unsupported weight type.
TensorType VecDotType(TensorType weight);
// Elements per block (1 for F32/F16/BF16) and bytes of n elements; n must be a multiple of the block size.
int64_t BlockSize(TensorType t);
size_t RowBytes(TensorType t, int64_t n);

// ---- Rows -------------------------------------------------------------------------------------------------
// n must be a multiple of BlockSize(t) (checked; a violation aborts). Pointers need no alignment.
void DequantizeRow(TensorType t, const void* src, float* dst, int64_t n);
// Reference quantisers (llama.cpp's quantize_row_*_ref: Q8_0/Q8_1 round half away from zero, Q8_K round half
// to even; K-quants search scales as llama.cpp does without an importance matrix). F32/F16/BF16 convert.
void QuantizeRow(TensorType t, const float* src, void* dst, int64_t n);
// Activation quantiser for matmuls: what llama.cpp's CPU backend (x86 AVX2 build, the one that made the golden
// files) does to an activation row: Q8_0/Q8_1 use id = 127/amax and round half to even (not the _ref
// rounding); Q8_K, F16, BF16 and F32 are the same as QuantizeRow. Use this for activations, QuantizeRow for
// weights (QuantizeRow reproduces llama-quantize byte for byte).
void QuantizeActivationRow(TensorType t, const float* src, void* dst, int64_t n);

// Scalar reference dot product of one weight row (weight_type) with one activation row already in
// VecDotType(weight_type), following llama.cpp's generic C numerics: integer sums per block, then float scale
// accumulation in block order (K-quants: 8 float lanes summed at the end; F16/BF16/F32: double accumulator).
// The low-bit types instead use the integer form of quants_lowbit.h (DotLowbitRef): the exact instruction
// sequence of their AVX2 kernels, so those agree bit for bit.
float VecDotRef(TensorType weight_type, int64_t n, const void* weight_row, const void* act_row);

}  // namespace rw::gguf
