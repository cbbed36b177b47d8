// Low-bit and non-linear weight formats: Q2_K, Q3_K, IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S,
// IQ4_XS, TQ1_0, TQ2_0 (dot products against Q8_K activations) and IQ4_NL, MXFP4 (against Q8_0).
//
// Every block is first brought to one integer form: weight j = dequant scale(group j/16) * q[j] with int8 q and
// an integer scale per group of 16 (Q2_K also subtracts dmin * mins[j/16]). Dequantisation evaluates llama.cpp
// v0.5.0's float expressions on that form (bit-identical to dequantize_row_*); the dot products use it directly:
// per super-block, 8 int32 lanes (lane l of 32-element chunk c sums scale(2c + l/4) * q * a over elements
// 32c + 4l .. 32c + 4l + 3, exact), then one fused multiply-add of (dot factor * d * d_act) into 8 float lanes
// (and, for Q2_K, one fused multiply-subtract of dmin * d_act times the 8 lanes of mins . bsums), then the fixed
// horizontal sum of kernels/avx2_blocks.h. The AVX2 kernels (kernels/lowbit_avx2.cc) compute the same integers
// and the same float operations, so DotLowbitRef is their bit-exact scalar twin.
#pragma once

#include <cstdint>

#include "gguf/quants.h"

namespace rw::gguf {

// True for the types of this file.
bool IsLowbitType(TensorType t);
// The 256-element formats (Q8_K activations); the others (IQ4_NL, MXFP4) have 32-element blocks and Q8_0.
bool IsLowbitKType(TensorType t);

// Integer form of one 256-element block.
struct DecodedK {
  int8_t q[256];
  int16_t sc[16];    // per group of 16 elements
  int16_t mins[16];  // Q2_K only (zero otherwise)
  float d;           // the block's float scale (IQ1_M: assembled from its scale bits)
  float dmin;        // Q2_K only
};
void DecodeK(TensorType t, const void* block, DecodedK* out);
// Constant that turns sc * q into the weight (with d): 1/8 for IQ1_*, IQ2_*; 1/4 for IQ3_XXS; 1 otherwise.
float DotFactorK(TensorType t);

// Integer form of one 32-element block (IQ4_NL, MXFP4): weight j = d * q[j].
struct Decoded32 {
  int8_t q[32];
  float d;
};
void Decode32(TensorType t, const void* block, Decoded32* out);
// MXFP4's shared exponent as llama.cpp's GGML_E8M0_TO_FP32_HALF: 2^(e - 128) (e < 2: the subnormals).
float E8M0Half(uint8_t e);

// llama.cpp's dequantize_row_* (nb blocks).
void DequantLowbit(TensorType t, const void* src, float* dst, int64_t nb);
// Scalar twin of the AVX2 dot products (see above); act is Q8_K (K types) or Q8_0 blocks.
float DotLowbitRef(TensorType t, const void* w, const void* act, int64_t nb);

}  // namespace rw::gguf
