// Binding of one LFM2 block (llama.cpp v0.5.0 llama_model_lfm2::load_arch_tensors): attn_norm, then a short
// convolution (shortconv.in_proj / conv / out_proj) or an attention (attn_q/k/v/output, attn_q_norm,
// attn_k_norm), then ffn_norm and a dense SwiGLU FFN (lfm2moe after the leading dense blocks: a
// sigmoid-routed MoE of SwiGLU experts).
#include "model/binder.h"

namespace rw::model::internal {

Status BindLfm2Block(const TensorBinder& b, const ModelConfig& c, int32_t il, LayerWeights* L) {
  const int64_t E = c.n_embd, D = c.head_dim, Hkv = c.n_head_kv;
  REWIND_ASSIGN_OR_RETURN(L->attn_norm, b.F32("attn_norm.weight", {E}));
  if (c.kinds[il] == LayerKind::kShortConv) {
    ShortConvWeights& s = L->conv;
    REWIND_ASSIGN_OR_RETURN(s.in, b.Mat("shortconv.in_proj.weight", {E, 3 * E}));
    REWIND_ASSIGN_OR_RETURN(s.conv, b.F32("shortconv.conv.weight", {c.ssm_conv_kernel, E}));
    REWIND_ASSIGN_OR_RETURN(s.out, b.Mat("shortconv.out_proj.weight", {E, E}));
  } else {
    AttnWeights& a = L->attn;
    if (b.Has("attn_qkv.weight"))
      return Error::Unsupported(b.what() + " '" + b.Name("attn_qkv.weight") +
                                "': fused attention qkv is not supported");
    REWIND_ASSIGN_OR_RETURN(a.q, b.Mat("attn_q.weight", {E, E}));
    REWIND_ASSIGN_OR_RETURN(a.k, b.Mat("attn_k.weight", {E, D * Hkv}));
    REWIND_ASSIGN_OR_RETURN(a.v, b.Mat("attn_v.weight", {E, D * Hkv}));
    REWIND_ASSIGN_OR_RETURN(a.out, b.Mat("attn_output.weight", {E, E}));
    REWIND_ASSIGN_OR_RETURN(a.q_norm, b.F32("attn_q_norm.weight", {D}));
    REWIND_ASSIGN_OR_RETURN(a.k_norm, b.F32("attn_k_norm.weight", {D}));
  }
  REWIND_ASSIGN_OR_RETURN(L->post_norm, b.F32("ffn_norm.weight", {E}));
  if (il < c.n_layer_dense_lead) return BindFfn(b, c, &L->ffn);
  FfnWeights& f = L->ffn;  // lfm2moe: sigmoid router with a selection bias, SwiGLU experts
  const int64_t X = c.n_expert, F = c.n_ff_exp;
  REWIND_ASSIGN_OR_RETURN(f.router, b.Mat("ffn_gate_inp.weight", {E, X}));
  REWIND_ASSIGN_OR_RETURN(f.exp_probs_b, b.F32("exp_probs_b.bias", {X}));
  REWIND_ASSIGN_OR_RETURN(f.gate_exps, b.Mat("ffn_gate_exps.weight", {E, F, X}));
  REWIND_ASSIGN_OR_RETURN(f.up_exps, b.Mat("ffn_up_exps.weight", {E, F, X}));
  REWIND_ASSIGN_OR_RETURN(f.down_exps, b.Mat("ffn_down_exps.weight", {F, E, X}));
  return Status::Ok();
}

}  // namespace rw::model::internal
