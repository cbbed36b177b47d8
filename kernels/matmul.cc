#include "kernels/matmul.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "base/check.h"
#include "kernels/alloc_tuning.h"
#include "kernels/dot.h"

// REWIND_HAVE_QUANTS is defined by kernels/CMakeLists.txt once gguf/quants.cc and kernels/vec_dot.h exist.
#if REWIND_HAVE_QUANTS
#include "gguf/quants.h"
#include "kernels/gemm.h"
#include "kernels/gemm_act.h"
#include "kernels/vec_dot.h"
#endif

namespace rw::kernels {
namespace {

constexpr int64_t kRowBlock = 16;  // output rows per inner block (cache reuse of x); does not affect results

void MatMulF32(const Matrix& w, const float* x, int64_t n_tok, float* y, ThreadPool* pool) {
  const int64_t K = w.n_cols, R = w.n_rows;
  ParallelFor(pool, R, [&](int64_t r0, int64_t r1) {
    for (int64_t rb = r0; rb < r1; rb += kRowBlock) {
      const int64_t re = std::min(r1, rb + kRowBlock);
      for (int64_t t = 0; t < n_tok; ++t) {
        const float* xt = x + t * K;
        float* yt = y + t * R;
        for (int64_t r = rb; r < re; ++r) {
          yt[r] = DotF32(reinterpret_cast<const float*>(w.Row(r)), xt, K);
        }
      }
    }
  }, 4);
}

#if REWIND_HAVE_QUANTS
void MatMulQuant(const Matrix& w, const float* x, int64_t n_tok, float* y, ThreadPool* pool) {
  const int64_t K = w.n_cols, R = w.n_rows;
  const gguf::TensorType at = gguf::VecDotType(w.type);
  const uint64_t arow = gguf::RowBytes(at, K);
  thread_local ScratchBuffer<uint8_t> act_buf;
  uint8_t* act = act_buf.Get(static_cast<size_t>(arow * n_tok) + 64);  // [n_tok][arow]
  ParallelFor(pool, n_tok, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) QuantizeActivation(at, x + t * K, act + t * arow, K);
  });
  if (n_tok >= 2 && GemmSupports(w.type)) {
    // Register-blocked tiles (kernels/gemm.h); each element has the bits of the VecDotRows path below.
    ParallelFor(pool, R, [&](int64_t r0, int64_t r1) {
      GemmRows(w.type, K, w.Row(r0), w.row_bytes, r1 - r0, act, arow, n_tok, y + r0, R);
    }, 4);
    return;
  }
  ParallelFor(pool, R, [&](int64_t r0, int64_t r1) {
    for (int64_t rb = r0; rb < r1; rb += kRowBlock) {
      const int64_t re = std::min(r1, rb + kRowBlock);
      for (int64_t t = 0; t < n_tok; ++t) {
        VecDotRows(w.type, K, w.Row(rb), w.row_bytes, re - rb, act + t * arow, y + t * R + rb);
      }
    }
  }, 4);
}
#endif

}  // namespace

bool MatMulSupports(gguf::TensorType type) {
  if (type == gguf::TensorType::kF32) return true;
#if REWIND_HAVE_QUANTS
  return gguf::IsSupportedWeightType(type);
#else
  return false;
#endif
}

void MatMul(const Matrix& w, const float* x, int64_t n_tok, float* y, ThreadPool* pool) {
  if (n_tok <= 0 || w.n_rows <= 0) return;
  if (w.type == gguf::TensorType::kF32) {
    MatMulF32(w, x, n_tok, y, pool);
    return;
  }
#if REWIND_HAVE_QUANTS
  MatMulQuant(w, x, n_tok, y, pool);
#else
  REWIND_CHECK_MSG(false, "weight type %s not supported in this build", gguf::TypeName(w.type));
#endif
}

void DequantizeRowTo(const Matrix& w, int64_t row, float* out) {
  if (w.type == gguf::TensorType::kF32) {
    std::memcpy(out, w.Row(row), sizeof(float) * w.n_cols);
    return;
  }
#if REWIND_HAVE_QUANTS
  gguf::DequantizeRow(w.type, w.Row(row), out, w.n_cols);
#else
  REWIND_CHECK_MSG(false, "weight type %s not supported in this build", gguf::TypeName(w.type));
#endif
}

}  // namespace rw::kernels
