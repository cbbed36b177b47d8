// Dot products of one weight row (any supported gguf weight type) with one activation row already converted
// to gguf::VecDotType(weight type) by gguf::QuantizeRow. Spec: ../shared/spec/gguf-and-quants.md section 4.
//
// Invariant I1 (batch invariance): the result for a given (weight row, activation row, n) is bit-identical
// whatever the number of rows in the call, the row index, the pointer alignment or the calling thread. Each
// dot reduces in one fixed order (fixed lane layout, block order and final horizontal sum); VecDotRows only
// interleaves independent rows. The AVX2 code (picked at run time when the CPU has AVX2+FMA+F16C) and the
// scalar twin (gguf::VecDotRef, llama.cpp's generic numerics) agree to rounding, not bitwise.
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
VecDotImpl ActiveVecDotImpl();   // what VecDot / VecDotRows use on this CPU
bool CpuHasVecDotAvx2();         // AVX2 + FMA + F16C present
// Same as VecDotRows with an explicit implementation (kAvx2 aborts when the CPU lacks it).
void VecDotRowsWith(VecDotImpl impl, gguf::TensorType weight_type, int64_t n, const void* w, size_t w_stride,
                    int64_t n_rows, const void* act, float* out);

}  // namespace rw::kernels
