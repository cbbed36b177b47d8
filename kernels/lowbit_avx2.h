// Internal to vec_dot_avx2.cc / gemm_avx2.cc: AVX2 kernels of the low-bit weight types (gguf/quants_lowbit.h).
// Compiled with -mavx2 -mfma -mf16c -ffp-contract=off, called after the CPU check. Every (row, token) element
// runs the float operations of gguf::DotLowbitRef on the same exact integers, so the results are that twin's bits
// whatever the call shape (rows, tokens, threads); activations holding -128 (which the sign trick of the integer
// products cannot take) are computed by the twin itself.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gguf/types.h"

namespace rw::kernels::lowbit_avx2 {

// wide: the caller checked AVX-512 F/BW/DQ/VL (IQ2_XXS / IQ3_XXS use 512-bit registers then; same bits).
void VecDotRows(gguf::TensorType t, int64_t n, const void* w, size_t w_stride, int64_t n_rows, const void* act,
                float* out, bool wide);
// wide: the caller checked AVX-512 F/BW/DQ/VL; 512-bit products from 4 tokens on (same bits).
void GemmRows(gguf::TensorType t, int64_t n, const void* w, size_t w_stride, int64_t n_rows, const void* act,
              size_t act_stride, int64_t n_tok, float* out, int64_t out_stride, bool wide);

// Q4_K / Q5_K / Q6_K batches of 4 or more tokens on 512-bit registers (caller checked AVX-512 F/BW/DQ/VL/VNNI):
// the same int32 lanes and float operations as kernels/vec_dot_avx2.cc's RowsQx_K / RowsQ6_K, so the same bits.
// Their values are unsigned, so -128 activations need no special case.
void GemmRowsKWide(gguf::TensorType t, int64_t n, const void* w, size_t w_stride, int64_t n_rows, const void* act,
                   size_t act_stride, int64_t n_tok, float* out, int64_t out_stride);

}  // namespace rw::kernels::lowbit_avx2
