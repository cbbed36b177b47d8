// Binding of one block of a Mamba-2 hybrid (llama.cpp v0.5.0 load_arch_tensors). nemotron_h: attn_norm and
// one sub-layer, a Mamba-2 mixer, a plain attention (no gate, no q/k norm) or a ReLU² MLP. granitehybrid:
// attn_norm, a Mamba-2 mixer or a plain attention, then ffn_norm and a SwiGLU FFN (dense, or a softmax MoE with
// an ungated shared expert: binder.cc BindFfn).
#include "model/binder.h"

namespace rw::model::internal {
namespace {

Status Unsupported(const TensorBinder& b, const char* name, const char* why) {
  return Error::Unsupported(b.what() + " '" + b.Name(name) + "': " + why);
}

Status BindMamba2(const TensorBinder& b, const ModelConfig& c, Mamba2Weights* m) {
  const int64_t E = c.n_embd, Di = c.ssm_inner, H = c.ssm_heads, G = c.ssm_group, C = c.ssm_conv_dim();
  REWIND_ASSIGN_OR_RETURN(m->in, b.Mat("ssm_in.weight", {E, 2 * Di + 2 * G * c.ssm_state + H}));
  REWIND_ASSIGN_OR_RETURN(m->conv, b.F32("ssm_conv1d.weight", {c.ssm_conv_kernel, C}));
  if (b.Has("ssm_conv1d.bias")) {
    REWIND_ASSIGN_OR_RETURN(m->conv_bias, b.F32("ssm_conv1d.bias", {C}));
  }
  REWIND_ASSIGN_OR_RETURN(m->dt_bias, b.F32("ssm_dt.bias", {H}));
  REWIND_ASSIGN_OR_RETURN(m->ssm_a, b.F32("ssm_a", {1, H}));
  REWIND_ASSIGN_OR_RETURN(m->ssm_d, b.F32("ssm_d", {1, H}));
  if (b.Has("ssm_norm.weight")) {
    REWIND_ASSIGN_OR_RETURN(m->norm, b.F32("ssm_norm.weight", {Di / G, G}));
  }
  REWIND_ASSIGN_OR_RETURN(m->out, b.Mat("ssm_out.weight", {Di, E}));
  return Status::Ok();
}

Status BindPlainAttention(const TensorBinder& b, const ModelConfig& c, AttnWeights* a) {
  const int64_t E = c.n_embd, D = c.head_dim, Hq = c.n_head, Hkv = c.n_head_kv;
  if (b.Has("attn_qkv.weight"))
    return Unsupported(b, "attn_qkv.weight", "fused attention qkv is not supported");
  for (const char* bias : {"attn_q.bias", "attn_k.bias", "attn_v.bias", "attn_output.bias"})
    if (b.Has(bias)) return Unsupported(b, bias, "attention biases are not supported");
  REWIND_ASSIGN_OR_RETURN(a->q, b.Mat("attn_q.weight", {E, D * Hq}));
  REWIND_ASSIGN_OR_RETURN(a->k, b.Mat("attn_k.weight", {E, D * Hkv}));
  REWIND_ASSIGN_OR_RETURN(a->v, b.Mat("attn_v.weight", {E, D * Hkv}));
  REWIND_ASSIGN_OR_RETURN(a->out, b.Mat("attn_output.weight", {D * Hq, E}));
  return Status::Ok();
}

// nemotron_h_moe: router, selection bias, ReLU² experts (no gate) and a ReLU² shared expert.
Status BindSigmoidMoe(const TensorBinder& b, const ModelConfig& c, FfnWeights* f) {
  const int64_t E = c.n_embd, X = c.n_expert, F = c.n_ff_exp, Fs = c.n_ff_shexp;
  for (const char* latent : {"ffn_latent_down.weight", "ffn_latent_up.weight"})
    if (b.Has(latent)) return Unsupported(b, latent, "latent MoE projections are not supported");
  REWIND_ASSIGN_OR_RETURN(f->router, b.Mat("ffn_gate_inp.weight", {E, X}));
  REWIND_ASSIGN_OR_RETURN(f->exp_probs_b, b.F32("exp_probs_b.bias", {X}));
  REWIND_ASSIGN_OR_RETURN(f->up_exps, b.Mat("ffn_up_exps.weight", {E, F, X}));
  REWIND_ASSIGN_OR_RETURN(f->down_exps, b.Mat("ffn_down_exps.weight", {F, E, X}));
  REWIND_ASSIGN_OR_RETURN(f->shexp_up, b.Mat("ffn_up_shexp.weight", {E, Fs}));
  REWIND_ASSIGN_OR_RETURN(f->shexp_down, b.Mat("ffn_down_shexp.weight", {Fs, E}));
  return Status::Ok();
}

Status BindReluSqrMlp(const TensorBinder& b, const ModelConfig& c, FfnWeights* f) {
  if (c.arch == Arch::kNemotronHMoe) return BindSigmoidMoe(b, c, f);
  for (const char* bias : {"ffn_up.bias", "ffn_down.bias"})
    if (b.Has(bias)) return Unsupported(b, bias, "MLP biases are not supported");
  REWIND_ASSIGN_OR_RETURN(f->up, b.Mat("ffn_up.weight", {c.n_embd, c.n_ff}));
  REWIND_ASSIGN_OR_RETURN(f->down, b.Mat("ffn_down.weight", {c.n_ff, c.n_embd}));
  return Status::Ok();
}

}  // namespace

Status BindMamba2HybridBlock(const TensorBinder& b, const ModelConfig& c, int32_t il, LayerWeights* L) {
  REWIND_ASSIGN_OR_RETURN(L->attn_norm, b.F32("attn_norm.weight", {c.n_embd}));
  if (c.arch == Arch::kGraniteHybrid) {
    if (c.kinds[il] == LayerKind::kMamba2) {
      REWIND_RETURN_IF_ERROR(BindMamba2(b, c, &L->mamba));
    } else {
      REWIND_RETURN_IF_ERROR(BindPlainAttention(b, c, &L->attn));
    }
    if (c.is_granite_moe() && !b.Has("ffn_gate_exps.weight") && !b.Has("ffn_gate_up_exps.weight"))
      return Unsupported(b, "ffn_gate_exps.weight", "MoE experts without a gate are not supported");
    for (const char* bias : {"ffn_gate.bias", "ffn_up.bias", "ffn_down.bias"})
      if (b.Has(bias)) return Unsupported(b, bias, "FFN biases are not supported");
    REWIND_ASSIGN_OR_RETURN(L->post_norm, b.F32("ffn_norm.weight", {c.n_embd}));
    return BindFfn(b, c, &L->ffn);
  }
  switch (c.kinds[il]) {
    case LayerKind::kMamba2:
      return BindMamba2(b, c, &L->mamba);
    case LayerKind::kAttention:
      return BindPlainAttention(b, c, &L->attn);
    case LayerKind::kFfn:
      return BindReluSqrMlp(b, c, &L->ffn);
    case LayerKind::kGdn:
    case LayerKind::kShortConv:
    case LayerKind::kKda:
      break;
  }
  return Error::Unsupported("Gated DeltaNet layers in a Mamba-2 hybrid");
}

}  // namespace rw::model::internal
