// The FFN blocks of the Vulkan forward (model/gpu_backend.h): the dense SwiGLU FFN (qwen35) and the softmax-routed
// MoE with a gated shared expert (qwen35moe, qwen3next; the CPU's model/ffn.cc + experts.cc), and qwen3next's
// fused GDN projections split on the device. Every kernel computes an output element in one invocation in a
// fixed order: a token's bits do not depend on which other tokens share its experts or its batch.
#include <string>

#include "gpu/ops.h"
#include "model/gpu_backend.h"

namespace rw::model::vk {

Status VulkanBackend::UploadFfn(int32_t il, GpuLayer& G) {
  Context& c = *ctx_;
  const FfnWeights& f = w_.layers[il].ffn;
  const std::string at = "layer " + std::to_string(il) + " ";
  if (!cfg_.is_moe()) {
    REWIND_ASSIGN_OR_RETURN(G.ffn_gate, UploadWeight(c, f.gate, at + "ffn_gate"));
    REWIND_ASSIGN_OR_RETURN(G.ffn_up, UploadWeight(c, f.up, at + "ffn_up"));
    REWIND_ASSIGN_OR_RETURN(G.ffn_down, UploadWeight(c, f.down, at + "ffn_down"));
    return Status::Ok();
  }
  REWIND_ASSIGN_OR_RETURN(G.router, UploadWeight(c, f.router, at + "ffn_gate_inp"));
  G.fused_gate_up = f.fused_gate_up;
  const int64_t F = cfg_.n_ff_exp, E = cfg_.n_embd;  // an expert's rows stay in one buffer
  if (f.fused_gate_up) {
    REWIND_ASSIGN_OR_RETURN(G.gate_exps, UploadWeight(c, f.gate_up_exps, at + "ffn_gate_up_exps", 2 * F));
  } else {
    REWIND_ASSIGN_OR_RETURN(G.gate_exps, UploadWeight(c, f.gate_exps, at + "ffn_gate_exps", F));
    REWIND_ASSIGN_OR_RETURN(G.up_exps, UploadWeight(c, f.up_exps, at + "ffn_up_exps", F));
  }
  REWIND_ASSIGN_OR_RETURN(G.down_exps, UploadWeight(c, f.down_exps, at + "ffn_down_exps", E));
  REWIND_ASSIGN_OR_RETURN(G.shexp_gate_inp, UploadWeight(c, f.shexp_gate_inp, at + "ffn_gate_inp_shexp"));
  REWIND_ASSIGN_OR_RETURN(G.shexp_gate, UploadWeight(c, f.shexp_gate, at + "ffn_gate_shexp"));
  REWIND_ASSIGN_OR_RETURN(G.shexp_up, UploadWeight(c, f.shexp_up, at + "ffn_up_shexp"));
  REWIND_ASSIGN_OR_RETURN(G.shexp_down, UploadWeight(c, f.shexp_down, at + "ffn_down_shexp"));
  return Status::Ok();
}

Status VulkanBackend::FfnBlock(const GpuLayer& L, int32_t N) {
  if (cfg_.is_moe()) return MoeBlock(L, N);
  REWIND_RETURN_IF_ERROR(Mat(L.ffn_gate, t_.buf, N, fg_.buf, true));  // t_ as the norm converted it
  REWIND_RETURN_IF_ERROR(Mat(L.ffn_up, t_.buf, N, fu_.buf, true));
  // SwiGLU in the down projection's activation conversion.
  return gpu::RecordSwiGluMatMul(*ctx_, L.ffn_down, fg_.buf, fu_.buf, N, y_.buf, 0, cfg_.n_embd, act_);
}

// Router (softmax, top k, renormalised weights), the K routed experts of every token as rows of an
// expert-indexed matmul (gate and up on the token's normed row, SwiGLU, down), the shared expert, and the
// weighted sum in k order plus the gated shared expert into y_.
Status VulkanBackend::MoeBlock(const GpuLayer& L, int32_t N) {
  Context& c = *ctx_;
  const uint32_t E = cfg_.n_embd, X = cfg_.n_expert, K = cfg_.n_expert_used, F = cfg_.n_ff_exp;
  const uint32_t n = static_cast<uint32_t>(N), NK = n * K;
  // Every product of the normed row t_ first, so that its quantised rows serve them all (gpu::MatMulReuse; a
  // product's bits do not depend on the order they are recorded in).
  REWIND_RETURN_IF_ERROR(Mat(L.router, t_.buf, N, moe_logits_.buf, true));  // t_ as the norm converted it
  REWIND_RETURN_IF_ERROR(Mat(L.shexp_gate, t_.buf, N, fg_.buf, true));  // shared expert: SwiGLU FFN, gate logit
  REWIND_RETURN_IF_ERROR(Mat(L.shexp_up, t_.buf, N, fu_.buf, true));
  REWIND_RETURN_IF_ERROR(Mat(L.shexp_gate_inp, t_.buf, N, sh_g_.buf, true));
  REWIND_RETURN_IF_ERROR(gpu::RecordMoeRoute(c, moe_logits_.buf, n, X, K, moe_sel_.buf, moe_wt_.buf));
  const int64_t gate_stride = L.fused_gate_up ? 2 * F : F;
  const gpu::ExpertRows gate{F, gate_stride, 0}, up{F, gate_stride, L.fused_gate_up ? F : 0}, down{E, E, 0};
  const GpuMatrix& up_m = L.fused_gate_up ? L.gate_exps : L.up_exps;
  // The routed rows are grouped by expert once (the tile) for the three products.
  REWIND_RETURN_IF_ERROR(
      gpu::RecordMatMulId(c, L.gate_exps, gate, moe_sel_.buf, t_.buf, N, K, NK, moe_h_.buf, act_, {true, false}));
  REWIND_RETURN_IF_ERROR(
      gpu::RecordMatMulId(c, up_m, up, moe_sel_.buf, t_.buf, N, K, NK, moe_u_.buf, act_, {true, true}));
  // SwiGLU in the down product's activation conversion.
  REWIND_RETURN_IF_ERROR(gpu::RecordSwiGluMatMulId(c, L.down_exps, down, moe_sel_.buf, moe_h_.buf, moe_u_.buf, NK, 1,
                                                   NK, moe_y_.buf, act_, {false, true}));
  REWIND_RETURN_IF_ERROR(gpu::RecordSwiGluMatMul(c, L.shexp_down, fg_.buf, fu_.buf, N, sh_y_.buf, 0, E, act_));
  return gpu::RecordMoeCombine(c, moe_y_.buf, moe_wt_.buf, n, K, E, &sh_y_.buf, &sh_g_.buf, y_.buf);
}

Status VulkanBackend::SplitFused(const GpuLayer& L, int32_t N) {
  Context& c = *ctx_;
  const uint32_t S = cfg_.ssm_state, Hk = cfg_.ssm_group, r = cfg_.ssm_heads / cfg_.ssm_group;
  REWIND_ASSIGN_OR_RETURN(gpu::Pipeline * p, c.GetPipeline("gdn_split"));
  struct { uint32_t N, S, Hk, r, mode; } pc{static_cast<uint32_t>(N), S, Hk, r, 0};
  if (L.in.valid()) {
    REWIND_RETURN_IF_ERROR(Mat(L.in, t_.buf, N, fused_.buf, true));  // t_ as the norm converted it
    c.Dispatch(*p, {{&fused_.buf}, {&qkv_.buf}, {&z_.buf}}, &pc, sizeof(pc), Groups(static_cast<uint64_t>(N) * L.in.n_rows));
  }
  if (L.ba.valid()) {
    REWIND_RETURN_IF_ERROR(Mat(L.ba, t_.buf, N, fused_.buf, true));  // t_ as the norm (and ssm_in) left it
    pc.mode = 1;
    c.Dispatch(*p, {{&fused_.buf}, {&b_.buf}, {&a_.buf}}, &pc, sizeof(pc), Groups(static_cast<uint64_t>(N) * L.ba.n_rows));
  }
  return Status::Ok();
}

}  // namespace rw::model::vk
