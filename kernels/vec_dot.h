// Dot products of one weight row (any supported gguf weight type) with one activation row already converted
// to gguf::VecDotType(weight type) by gguf::QuantizeActivationRow (llama.cpp's x86 activation rounding; plain
// gguf::QuantizeRow also works but rounds Q8_0/Q8_1 ties the _ref way, further from the golden files). Spec: ../shared/spec/gguf-and-quants.md section 4.
//
// Invariant I1 (batch invariance): the result for a given (weight row, activation row, n) is bit-identical
// whatever the number of rows in the call, the row index, the pointer alignment or the calling thread. Each
// dot reduces in one fixed order (fixed lane layout, block order and final horizontal sum); VecDotRows only
// interleaves independent rows. The AVX2 code (picked at run time when the CPU has AVX2+FMA+F16C) and the
// scalar twin (gguf::VecDotRef, llama.cpp's generic numerics) agree to rounding, not bitwise. The AVX2 float
// order of Q8_0/Q4_0/Q4_1/Q5_0/Q5_1 is the one of llama.cpp's AVX2 vec_dot and tinyBLAS kernels (8 lanes, one
// FMA per block, same final sum), F16/BF16/F32 follow tinyBLAS (one 8-lane FMA accumulator), which llama.cpp
// uses for batches of >= 2 tokens; the K-quants use their own fixed order (llama.cpp repacks those).
#pragma once

#include <cstddef>
#include <cstdint>

#include "gguf/types.h"

namespace rw::kernels {

// weight_type: gguf::IsSupportedWeightType; n: multiple of the type's block size; w, act: any alignment.
float VecDot(gguf::TensorType weight_type, int64_t n, const void* w, const void* act);

// out[r] = VecDot(weight_type, n, w + r * w_stride, act) for r < n_rows (w_stride in bytes).
void VecDotRows(gguf::TensorType weight_type, int64_t n, const void* w, size_t w_stride, int64_t n_rows,
                const void* act, float* out);

// Implementation choice, for tests and benchmarks.
enum class VecDotImpl { kScalar, kAvx2 };
VecDotImpl ActiveVecDotImpl();  // what VecDot / VecDotRows use: kAvx2 when CpuHasAvx2FmaF16c() (base/cpu_features.h)
// Tests: allow (default) or forbid the AVX-512 VNNI variants of the AVX2 kernels (the same bits either way).
void VecDotAllowAvx512(bool allow);
// Same as VecDotRows with an explicit implementation (kAvx2 aborts when the CPU lacks it).
void VecDotRowsWith(VecDotImpl impl, gguf::TensorType weight_type, int64_t n, const void* w, size_t w_stride,
                    int64_t n_rows, const void* act, float* out);

}  // namespace rw::kernels
