// Multi-token matmul kernels: out[t][r] = VecDot(type, n, w_r, act_t) for a block of weight rows and a block of
// activation rows, register-blocked so each weight block is loaded and decoded once for several tokens.
//
// Invariant I1: every output element runs exactly the float instruction sequence of the single-row,
// single-token AVX2 VecDot (kernels/vec_dot_avx2.cc): the same exact integer block sums in the same 8 lanes,
// one FMA per block into that element's own accumulator in block order, the same final horizontal sum. The
// tile shape only changes which independent elements are interleaved, so a 1 x 1 call, a 1 x 4 tile and
// VecDotRows give identical bits (tested in kernels/gemm_test.cc).
#pragma once

#include <cstddef>
#include <cstdint>

#include "gguf/types.h"

namespace rw::kernels {

// True when GemmRows has a tiled kernel for this weight type on this CPU (AVX2 + FMA + F16C).
bool GemmSupports(gguf::TensorType weight_type);

// For r < n_rows, t < n_tok: out[t * out_stride + r] = VecDot(weight_type, n, w + r * w_stride,
// act + t * act_stride) with the activations already converted to VecDotType(weight_type). Strides in bytes
// (w, act) and floats (out). Requires GemmSupports(weight_type).
void GemmRows(gguf::TensorType weight_type, int64_t n, const void* w, size_t w_stride, int64_t n_rows,
              const void* act, size_t act_stride, int64_t n_tok, float* out, int64_t out_stride);

// For tests and gemm_bench: false makes GemmRows use only the plain AVX2 kernels, also where the CPU has
// AVX512-VL + AVX512-VNNI and GemmRows would use its bit-identical variants (Q8_0 through vpdpbusd, larger
// K-quant tiles in 32 ymm registers). Default true. Not thread-safe against running GemmRows.
void GemmAllowAvx512(bool allow);

}  // namespace rw::kernels
