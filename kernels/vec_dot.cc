// Run-time dispatch between the AVX2 kernels (vec_dot_avx2.cc) and the scalar twin (ref/vec_dot_ref.cc).
#include "kernels/vec_dot.h"

#include "base/check.h"
#include "base/cpu_features.h"
#include "gguf/quants.h"
#include "kernels/ref/vec_dot_ref.h"
#include "kernels/vec_dot_avx2.h"

namespace rw::kernels {

void VecDotAllowAvx512(bool allow) { avx2::AllowAvx512(allow); }

VecDotImpl ActiveVecDotImpl() { return CpuHasAvx2FmaF16c() ? VecDotImpl::kAvx2 : VecDotImpl::kScalar; }

void VecDotRowsWith(VecDotImpl impl, gguf::TensorType weight_type, int64_t n, const void* w, size_t w_stride,
                    int64_t n_rows, const void* act, float* out) {
  REWIND_CHECK_MSG(gguf::IsSupportedWeightType(weight_type), "VecDot: unsupported weight type %s",
                   gguf::TypeName(weight_type));
  REWIND_CHECK_MSG(n >= 0 && n % gguf::BlockSize(weight_type) == 0, "VecDot: n=%lld is not a multiple of %s blocks",
                   static_cast<long long>(n), gguf::TypeName(weight_type));
  if (n_rows <= 0) return;
  if (impl == VecDotImpl::kAvx2 && avx2::Supports(weight_type)) {
    REWIND_CHECK_MSG(CpuHasAvx2FmaF16c(), "VecDot: AVX2 requested on a CPU without AVX2+FMA+F16C");
    avx2::VecDotRows(weight_type, n, w, w_stride, n_rows, act, out);
    return;
  }
  ref::VecDotRows(weight_type, n, w, w_stride, n_rows, act, out);
}

void VecDotRows(gguf::TensorType weight_type, int64_t n, const void* w, size_t w_stride, int64_t n_rows,
                const void* act, float* out) {
  VecDotRowsWith(ActiveVecDotImpl(), weight_type, n, w, w_stride, n_rows, act, out);
}

float VecDot(gguf::TensorType weight_type, int64_t n, const void* w, const void* act) {
  float out;
  VecDotRowsWith(ActiveVecDotImpl(), weight_type, n, w, 0, 1, act, &out);
  return out;
}

}  // namespace rw::kernels
