// Scalar reference twins of the fast kernels: straightforward loops in the spec's indexing, double accumulation
// where it helps. Used only by tests (fast vs twin within tolerance).
#pragma once

#include <cstdint>

#include "kernels/attention.h"
#include "kernels/matmul.h"

namespace rw::kernels::ref {

// Σ a·b in double.
double Dot(const float* a, const float* b, int64_t n);
// y[t][r] = dequant(W[r])·x[t] in double (no activation rounding).
void MatMul(const Matrix& w, const float* x, int64_t n_tok, float* y);
// Spec indexing: Mh[i][j] with i = key index; state passed in llama layout M[j·S+i] like the fast kernel.
void GdnHeadStep(float* M, const float* q, const float* k, const float* v, float beta, float g, int32_t S,
                 float* o);
// Two-pass softmax over all keys in double.
void AttendOne(const float* q, int32_t D, int32_t kvh, int32_t n_keys, const KvPages& kv, float scale,
               float* out);

}  // namespace rw::kernels::ref
