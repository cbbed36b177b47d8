// Activation rows converted to VecDotType(weight type) for MatMul: the same bytes as
// gguf::QuantizeActivationRow (llama.cpp's x86 activation rounding), through AVX2 where the CPU has it. The
// fast path changes only speed, never a bit (tested in kernels/gemm_act_test.cc).
#pragma once

#include <cstdint>

#include "gguf/types.h"

namespace rw::kernels {

// dst = gguf::QuantizeActivationRow(type, src, n) bytes. type: an activation type (Q8_0, Q8_1, Q8_K, F16,
// BF16, F32).
void QuantizeActivation(gguf::TensorType type, const float* src, void* dst, int64_t n);

}  // namespace rw::kernels
