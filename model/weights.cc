#include "model/weights.h"

#include <string>

#include "model/binder.h"

namespace rw::model {

Expected<Weights> BindWeights(const gguf::File& file, const ModelConfig& c) {
  internal::TensorBinder b(file, "", "tensor");
  Weights w;
  const int64_t E = c.n_embd, V = c.n_vocab;
  REWIND_ASSIGN_OR_RETURN(w.token_embd, b.Mat("token_embd.weight", {E, V}));
  // LFM2's final norm is stored as token_embd_norm (llama.cpp LLM_TENSOR_OUTPUT_NORM_LFM2).
  REWIND_ASSIGN_OR_RETURN(w.output_norm, b.F32(c.is_lfm2() ? "token_embd_norm.weight" : "output_norm.weight", {E}));
  if (b.Has("output.weight")) {
    REWIND_ASSIGN_OR_RETURN(w.output, b.Mat("output.weight", {E, V}));
  } else {
    w.output = w.token_embd;
    w.tied = true;
  }
  const int64_t S = c.ssm_state, Hv = c.ssm_heads, Kd = c.ssm_key_dim(), Vd = c.ssm_inner, C = c.ssm_conv_dim();
  const int64_t Kc = c.ssm_conv_kernel;
  w.layers.resize(c.n_layer);
  for (int il = 0; il < c.n_layer; ++il) {
    LayerWeights& L = w.layers[il];
    const internal::TensorBinder lb(file, "blk." + std::to_string(il) + ".", "tensor");
    if (c.is_lfm2()) {
      REWIND_RETURN_IF_ERROR(internal::BindLfm2Block(lb, c, il, &L));
      continue;
    }
    if (c.is_kimi()) {
      REWIND_RETURN_IF_ERROR(internal::BindKimiBlock(lb, c, il, &L));
      continue;
    }
    if (!c.qwen_blocks()) {
      REWIND_RETURN_IF_ERROR(internal::BindMamba2HybridBlock(lb, c, il, &L));
      continue;
    }
    REWIND_ASSIGN_OR_RETURN(L.attn_norm, lb.F32("attn_norm.weight", {E}));
    REWIND_ASSIGN_OR_RETURN(L.post_norm, lb.F32("post_attention_norm.weight", {E}));
    if (c.kinds[il] == LayerKind::kGdn) {
      GdnWeights& g = L.gdn;
      if (c.arch == Arch::kQwen3Next && !lb.Has("attn_qkv.weight") && lb.Has("ssm_in.weight")) {
        g.legacy_in = true;
        REWIND_ASSIGN_OR_RETURN(g.in, lb.Mat("ssm_in.weight", {E, 2 * Kd + 2 * Vd}));
      } else {
        REWIND_ASSIGN_OR_RETURN(g.qkv, lb.Mat("attn_qkv.weight", {E, C}));
        REWIND_ASSIGN_OR_RETURN(g.gate, lb.Mat("attn_gate.weight", {E, Vd}));
      }
      if (c.arch == Arch::kQwen3Next) {
        REWIND_ASSIGN_OR_RETURN(g.ba, lb.Mat("ssm_ba.weight", {E, 2 * Hv}));
      } else {
        REWIND_ASSIGN_OR_RETURN(g.beta, lb.Mat("ssm_beta.weight", {E, Hv}));
        REWIND_ASSIGN_OR_RETURN(g.alpha, lb.Mat("ssm_alpha.weight", {E, Hv}));
      }
      REWIND_ASSIGN_OR_RETURN(g.out, lb.Mat("ssm_out.weight", {Vd, E}));
      REWIND_ASSIGN_OR_RETURN(g.dt_bias, lb.F32("ssm_dt.bias", {Hv}));
      REWIND_ASSIGN_OR_RETURN(g.ssm_a, lb.F32("ssm_a", {Hv}));
      REWIND_ASSIGN_OR_RETURN(g.conv, lb.F32("ssm_conv1d.weight", {Kc, C}));
      REWIND_ASSIGN_OR_RETURN(g.norm, lb.F32("ssm_norm.weight", {S}));
    } else {
      REWIND_RETURN_IF_ERROR(internal::BindAttention(lb, c, &L.attn));
    }
    REWIND_RETURN_IF_ERROR(internal::BindFfn(lb, c, &L.ffn));
  }
  return w;
}

}  // namespace rw::model
