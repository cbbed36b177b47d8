// Weight matrix times activations: y[t][r] = W[r]·x[t]. One code path per output element whatever the number of
// tokens or threads (I1): F32 weights use DotF32; other types follow llama.cpp: each activation row is quantised
// once to VecDotType(weight type) with llama.cpp's x86 activation rounding (gguf::QuantizeActivationRow, through
// kernels/gemm_act.h) and every output element is one VecDot of a weight row with it.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
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

// One product of a MatMulMany region: y = w · x for n_tok tokens, optionally with a second weight w2 of the
// same shape on the same x (y2 = w2 · x: gate and up of a SwiGLU FFN) and an element-wise epilogue.
struct MatMulJob {
  Matrix w;
  const float* x = nullptr;  // [n_tok][w.n_cols]
  int64_t n_tok = 0;
  float* y = nullptr;  // [n_tok][w.n_rows]
  Matrix w2;            // optional (data == nullptr: none): same n_rows and n_cols as w
  float* y2 = nullptr;  // [n_tok][w.n_rows] when w2 is set
  // Optional: called on the thread that computed rows [r0, r1) of y (and y2), for all n_tok tokens, right
  // after it did (an element-wise epilogue on those rows, while they are in cache).
  const std::function<void(int64_t r0, int64_t r1)>* rows_done = nullptr;
};

// The plain product y = w · x as a job.
inline MatMulJob Product(const Matrix& w, const float* x, int64_t n_tok, float* y) {
  MatMulJob j;
  j.w = w;
  j.x = x;
  j.n_tok = n_tok;
  j.y = y;
  return j;
}

// Every job in one parallel region (after at most one region that quantises the distinct activations): the
// threads split the concatenation of all jobs' rows, balanced by weight bytes times tokens, each thread a
// contiguous run of rows aligned to kMatMulRowAlign within each job, so every thread streams its own contiguous
// weight bytes. Each output element has the bits of MatMul's (one dot product in a fixed order).
constexpr int64_t kMatMulRowAlign = 8;
void MatMulMany(std::span<const MatMulJob> jobs, ThreadPool* pool);

// One weight row converted to F32 (embedding lookup). out: [w.n_cols].
void DequantizeRowTo(const Matrix& w, int64_t row, float* out);

}  // namespace rw::kernels
