// Run-time dispatch for kernels/gemm_act.h.
#include "kernels/gemm_act.h"

#include "base/cpu_features.h"
#include "gguf/quants.h"
#include "kernels/f16_row.h"
#include "kernels/vec_dot.h"

namespace rw::kernels {
namespace gemm_act_avx2 {
void QuantQ8_0(const float* x, gguf::BlockQ8_0* y, int64_t nb);
void QuantQ8_K(const float* x, gguf::BlockQ8_K* y, int64_t nb);
}  // namespace gemm_act_avx2

void QuantizeActivation(gguf::TensorType type, const float* src, void* dst, int64_t n) {
  using gguf::TensorType;
  if (n > 0 && CpuHasAvx2FmaF16c()) {
    switch (type) {
      case TensorType::kQ8_0:
        if (n % gguf::kQK != 0) break;
        return gemm_act_avx2::QuantQ8_0(src, static_cast<gguf::BlockQ8_0*>(dst), n / gguf::kQK);
      case TensorType::kQ8_K:
        if (n % gguf::kQK_K != 0) break;
        return gemm_act_avx2::QuantQ8_K(src, static_cast<gguf::BlockQ8_K*>(dst), n / gguf::kQK_K);
      case TensorType::kF16:  // F16C rounding == gguf::Fp32ToFp16 (round to nearest even, x86 NaN rule)
        return FloatToHalfRow(src, static_cast<uint16_t*>(dst), n);
      default: break;
    }
  }
  gguf::QuantizeActivationRow(type, src, dst, n);
}

}  // namespace rw::kernels
