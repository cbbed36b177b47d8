// Weight matrix times activations: y[t][r] = W[r]·x[t]. One code path per output element whatever the number of
// tokens or threads (I1): F32 weights use DotF32; other types follow llama.cpp: each activation row is quantised
// once to VecDotType(weight type) with llama.cpp's x86 activation rounding (gguf::QuantizeActivationRow, through
// kernels/gemm_act.h) and every output element is one VecDot of a weight row with it.
#pragma once

#include <cstdint>
#include <string>

#include "gguf/types.h"
#include "kernels/thread_pool.h"

namespace rw::kernels {

// A 2-D weight: n_rows rows of n_cols elements of `type` (GGUF {n_cols, n_rows}), rows row_bytes apart.
struct Matrix {
  gguf::TensorType type = gguf::TensorType::kF32;
  const uint8_t* data = nullptr;
  int64_t n_cols = 0;
  int64_t n_rows = 0;
  uint64_t row_bytes = 0;

  const uint8_t* Row(int64_t r) const { return data + static_cast<uint64_t>(r) * row_bytes; }
};

// True if MatMul and DequantizeRowTo can handle this weight type in this build.
bool MatMulSupports(gguf::TensorType type);

// x: [n_tok][w.n_cols], y: [n_tok][w.n_rows]. Threads split output rows.
void MatMul(const Matrix& w, const float* x, int64_t n_tok, float* y, ThreadPool* pool);

// One weight row converted to F32 (embedding lookup). out: [w.n_cols].
void DequantizeRowTo(const Matrix& w, int64_t row, float* out);

}  // namespace rw::kernels
