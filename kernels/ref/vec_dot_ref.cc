#include "kernels/ref/vec_dot_ref.h"

#include "gguf/quants.h"

namespace rw::kernels::ref {

float VecDot(gguf::TensorType weight_type, int64_t n, const void* w, const void* act) {
  return gguf::VecDotRef(weight_type, n, w, act);
}

void VecDotRows(gguf::TensorType weight_type, int64_t n, const void* w, size_t w_stride, int64_t n_rows,
                const void* act, float* out) {
  const auto* base = static_cast<const uint8_t*>(w);
  for (int64_t r = 0; r < n_rows; ++r) out[r] = gguf::VecDotRef(weight_type, n, base + r * w_stride, act);
}

}  // namespace rw::kernels::ref
