// Scalar twin of kernels/vec_dot.h: llama.cpp's generic C numerics (gguf::VecDotRef), one row at a time.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gguf/types.h"

namespace rw::kernels::ref {

float VecDot(gguf::TensorType weight_type, int64_t n, const void* w, const void* act);
void VecDotRows(gguf::TensorType weight_type, int64_t n, const void* w, size_t w_stride, int64_t n_rows,
                const void* act, float* out);

}  // namespace rw::kernels::ref
