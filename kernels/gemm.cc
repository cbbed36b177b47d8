// Run-time dispatch for kernels/gemm.h: the tiled AVX2 kernels exist only where the CPU runs the AVX2 VecDot.
#include "kernels/gemm.h"

#include "base/check.h"
#include "kernels/vec_dot.h"

namespace rw::kernels {
namespace gemm_avx2 {
bool Supports(gguf::TensorType t);
void AllowAvx512(bool allow);
void GemmRows(gguf::TensorType t, int64_t n, const void* w, size_t w_stride, int64_t n_rows, const void* act,
              size_t act_stride, int64_t n_tok, float* out, int64_t out_stride);
}  // namespace gemm_avx2

bool GemmSupports(gguf::TensorType weight_type) {
  return ActiveVecDotImpl() == VecDotImpl::kAvx2 && gemm_avx2::Supports(weight_type);
}

void GemmRows(gguf::TensorType weight_type, int64_t n, const void* w, size_t w_stride, int64_t n_rows,
              const void* act, size_t act_stride, int64_t n_tok, float* out, int64_t out_stride) {
  REWIND_CHECK_MSG(GemmSupports(weight_type), "GemmRows: no tiled kernel for %s on this CPU",
                   gguf::TypeName(weight_type));
  if (n_rows <= 0 || n_tok <= 0) return;
  gemm_avx2::GemmRows(weight_type, n, w, w_stride, n_rows, act, act_stride, n_tok, out, out_stride);
}

void GemmAllowAvx512(bool allow) { gemm_avx2::AllowAvx512(allow); }

}  // namespace rw::kernels
