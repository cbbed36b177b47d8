// LFM2 / LFM2-MoE generator: llama.cpp v0.5.0 names and shapes (llama_model_lfm2 / lfm2moe
// load_arch_tensors), metadata as conversion/lfm2.py writes it (lfm2moe: leading dense blocks, then
// sigmoid-routed MoE blocks): per-layer attention.head_count_kv (0 = short convolution), shortconv.l_cache,
// the final norm named token_embd_norm.
#include "modelgen/planner.h"

namespace rw::modelgen {

void Lfm2Metadata(const ModelConfig& c, gguf::Writer* w) {
  ArchKeys k(c, w);
  k.Sizes();
  k.U32("attention.head_count", c.n_head);
  k.KvPerLayer(c.n_head_kv);
  k.F32("rope.freq_base", c.rope_base);
  k.F32("attention.layer_norm_rms_epsilon", c.eps);
  k.U32("vocab_size", c.n_vocab);
  k.U32("shortconv.l_cache", c.ssm_conv);
  k.U32("feed_forward_length", c.n_ff);
  if (c.arch == "lfm2moe") {  // conversion/lfm2.py LFM2MoeModel
    k.Experts();
    k.U32("leading_dense_block_count", c.n_dense_lead);
    k.U32("expert_gating_func", 2);  // sigmoid
  }
}

std::vector<TensorSpec> Lfm2Plan(const ModelConfig& c) {
  std::vector<TensorSpec> t;
  Planner p(&t);
  const int64_t E = c.n_embd, V = c.n_vocab, D = c.head_dim, F = c.n_ff;
  const double out_scale = 4.0 / std::sqrt(static_cast<double>(E));
  p.EmbeddingAndHead(E, V, c.tied, "token_embd_norm", out_scale);
  for (int64_t il = 0; il < c.n_layer; ++il) {
    p.Gain(il, "attn_norm", E);
    if (c.IsRecurrent(il)) {
      p.Matrix(il, "shortconv.in_proj", {E, 3 * E}, InStd(E));
      p.Add(il, "shortconv.conv", {c.ssm_conv, E}, Init::kNormal, 0, 0.5, true);
      p.Matrix(il, "shortconv.out_proj", {E, E}, ResidualStd(E));
    } else {
      p.Matrix(il, "attn_q", {E, E}, InStd(E));
      p.Matrix(il, "attn_k", {E, D * c.n_head_kv}, InStd(E));
      p.Matrix(il, "attn_v", {E, D * c.n_head_kv}, InStd(E));
      p.Matrix(il, "attn_output", {E, E}, ResidualStd(E));
      p.Gain(il, "attn_q_norm", D);
      p.Gain(il, "attn_k_norm", D);
    }
    p.Gain(il, "ffn_norm", E);
    if (c.arch == "lfm2moe" && il >= c.n_dense_lead) {
      p.Router(il, E, c.n_expert, /*bias=*/true);
      p.SwiGlu(il, "_exps", E, c.n_ff_exp, c.n_expert);
      continue;
    }
    p.SwiGlu(il, "", E, F);
  }
  return t;
}

}  // namespace rw::modelgen
