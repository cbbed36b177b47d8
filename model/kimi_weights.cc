// Binding of one kimi-linear block (llama.cpp v0.5.0 llama_model_kimi_linear::load_arch_tensors): attn_norm,
// then KDA (attn_q/k/v, ssm_conv1d_q/k/v, ssm_f_a/f_b, ssm_beta, ssm_a, ssm_dt.bias, ssm_g_a/g_b, ssm_norm,
// attn_output) or MLA with the split kv_b (attn_q, attn_kv_a_mqa, attn_kv_a_norm, attn_k_b, attn_v_b,
// attn_output), then ffn_norm and a dense SwiGLU FFN (the leading blocks) or the sigmoid-routed MoE with
// exp_probs_b and an optional SwiGLU shared expert.
#include "model/binder.h"

namespace rw::model::internal {

namespace {

Status Unsupported(const TensorBinder& b, const char* name, const std::string& why) {
  return Error::Unsupported(b.what() + " '" + b.Name(name) + "': " + why);
}

Status BindKda(const TensorBinder& b, const ModelConfig& c, KdaWeights* k) {
  const int64_t E = c.n_embd, S = c.ssm_state, H = c.ssm_heads, D = S * H, Kc = c.ssm_conv_kernel;
  if (b.Has("attn_qkv.weight")) return Unsupported(b, "attn_qkv.weight", "a fused KDA qkv is not supported");
  REWIND_ASSIGN_OR_RETURN(k->q, b.Mat("attn_q.weight", {E, D}));
  REWIND_ASSIGN_OR_RETURN(k->k, b.Mat("attn_k.weight", {E, D}));
  REWIND_ASSIGN_OR_RETURN(k->v, b.Mat("attn_v.weight", {E, D}));
  const char* conv[3] = {"ssm_conv1d_q.weight", "ssm_conv1d_k.weight", "ssm_conv1d_v.weight"};
  for (int i = 0; i < 3; ++i) {
    REWIND_ASSIGN_OR_RETURN(k->conv[i], b.F32(conv[i], {Kc, 1, D}));
  }
  REWIND_ASSIGN_OR_RETURN(k->f_a, b.Mat("ssm_f_a.weight", {E, S}));
  REWIND_ASSIGN_OR_RETURN(k->f_b, b.Mat("ssm_f_b.weight", {S, D}));
  REWIND_ASSIGN_OR_RETURN(k->beta, b.Mat("ssm_beta.weight", {E, H}));
  REWIND_ASSIGN_OR_RETURN(k->ssm_a, b.F32("ssm_a", {1, H}));
  REWIND_ASSIGN_OR_RETURN(k->dt_bias, b.F32("ssm_dt.bias", {D}));
  REWIND_ASSIGN_OR_RETURN(k->g_a, b.Mat("ssm_g_a.weight", {E, S}));
  REWIND_ASSIGN_OR_RETURN(k->g_b, b.Mat("ssm_g_b.weight", {S, D}));
  REWIND_ASSIGN_OR_RETURN(k->norm, b.F32("ssm_norm.weight", {S}));
  REWIND_ASSIGN_OR_RETURN(k->out, b.Mat("attn_output.weight", {D, E}));
  return Status::Ok();
}

Status BindMla(const TensorBinder& b, const ModelConfig& c, MlaWeights* m) {
  const int64_t E = c.n_embd, H = c.n_head, R = c.kv_lora_rank, rope = c.n_rot;
  const int64_t nope = c.mla_k - rope, Vh = c.mla_v;
  if (b.Has("attn_q_a.weight")) return Unsupported(b, "attn_q_a.weight", "a compressed MLA query is not supported");
  if (!b.Has("attn_k_b.weight") && b.Has("attn_kv_b.weight"))
    return Unsupported(b, "attn_kv_b.weight", "an unsplit kv_b (legacy GGUF) is not supported; reconvert");
  REWIND_ASSIGN_OR_RETURN(m->q, b.Mat("attn_q.weight", {E, H * c.mla_k}));
  REWIND_ASSIGN_OR_RETURN(m->kv_a, b.Mat("attn_kv_a_mqa.weight", {E, R + rope}));
  REWIND_ASSIGN_OR_RETURN(m->kv_a_norm, b.F32("attn_kv_a_norm.weight", {R}));
  REWIND_ASSIGN_OR_RETURN(m->k_b, b.Mat("attn_k_b.weight", {nope, R, H}));
  REWIND_ASSIGN_OR_RETURN(m->v_b, b.Mat("attn_v_b.weight", {R, Vh, H}));
  REWIND_ASSIGN_OR_RETURN(m->out, b.Mat("attn_output.weight", {H * Vh, E}));
  return Status::Ok();
}

}  // namespace

Status BindKimiBlock(const TensorBinder& b, const ModelConfig& c, int32_t il, LayerWeights* L) {
  const int64_t E = c.n_embd;
  REWIND_ASSIGN_OR_RETURN(L->attn_norm, b.F32("attn_norm.weight", {E}));
  if (c.kinds[il] == LayerKind::kKda) {
    REWIND_RETURN_IF_ERROR(BindKda(b, c, &L->kda));
  } else {
    REWIND_RETURN_IF_ERROR(BindMla(b, c, &L->mla));
  }
  REWIND_ASSIGN_OR_RETURN(L->post_norm, b.F32("ffn_norm.weight", {E}));
  FfnWeights& f = L->ffn;
  if (il < c.n_layer_dense_lead) {
    REWIND_ASSIGN_OR_RETURN(f.gate, b.Mat("ffn_gate.weight", {E, c.n_ff}));
    REWIND_ASSIGN_OR_RETURN(f.up, b.Mat("ffn_up.weight", {E, c.n_ff}));
    REWIND_ASSIGN_OR_RETURN(f.down, b.Mat("ffn_down.weight", {c.n_ff, E}));
    return Status::Ok();
  }
  const int64_t X = c.n_expert, F = c.n_ff_exp, Fs = c.n_ff_shexp;
  REWIND_ASSIGN_OR_RETURN(f.router, b.Mat("ffn_gate_inp.weight", {E, X}));
  REWIND_ASSIGN_OR_RETURN(f.exp_probs_b, b.F32("exp_probs_b.bias", {X}));
  REWIND_ASSIGN_OR_RETURN(f.gate_exps, b.Mat("ffn_gate_exps.weight", {E, F, X}));
  REWIND_ASSIGN_OR_RETURN(f.up_exps, b.Mat("ffn_up_exps.weight", {E, F, X}));
  REWIND_ASSIGN_OR_RETURN(f.down_exps, b.Mat("ffn_down_exps.weight", {F, E, X}));
  if (!b.Has("ffn_up_shexp.weight")) return Status::Ok();  // llama.cpp: the shared expert is optional
  REWIND_ASSIGN_OR_RETURN(f.shexp_gate, b.Mat("ffn_gate_shexp.weight", {E, Fs}));
  REWIND_ASSIGN_OR_RETURN(f.shexp_up, b.Mat("ffn_up_shexp.weight", {E, Fs}));
  REWIND_ASSIGN_OR_RETURN(f.shexp_down, b.Mat("ffn_down_shexp.weight", {Fs, E}));
  return Status::Ok();
}

}  // namespace rw::model::internal
