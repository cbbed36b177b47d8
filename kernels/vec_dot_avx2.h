// Internal to vec_dot.cc / vec_dot_avx2.cc (compiled with -mavx2 -mfma -mf16c). Use kernels/vec_dot.h.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gguf/types.h"

namespace rw::kernels::avx2 {

// True for the weight types this file implements (the others fall back to the scalar twin).
bool Supports(gguf::TensorType weight_type);
// Lets the AVX-512 VNNI variants run when the CPU has them (default) or not; their results are the same bits.
void AllowAvx512(bool allow);
void VecDotRows(gguf::TensorType weight_type, int64_t n, const void* w, size_t w_stride, int64_t n_rows,
                const void* act, float* out);

}  // namespace rw::kernels::avx2
