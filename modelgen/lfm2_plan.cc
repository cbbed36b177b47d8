// LFM2 / LFM2-MoE generator: llama.cpp v0.5.0 names and shapes (llama_model_lfm2 / lfm2moe
// load_arch_tensors), metadata as conversion/lfm2.py writes it (lfm2moe: leading dense blocks, then
// sigmoid-routed MoE blocks): per-layer attention.head_count_kv (0 = short convolution), shortconv.l_cache,
// the final norm named token_embd_norm.
#include "modelgen/planner.h"

namespace rw::modelgen {

void Lfm2Metadata(const ModelConfig& c, gguf::Writer* w) {
  const std::string a = c.arch + ".";
  std::vector<int32_t> kv;
  for (int64_t i = 0; i < c.n_layer_all(); ++i)
    kv.push_back(c.IsAttention(i) ? static_cast<int32_t>(c.n_head_kv) : 0);
  w->SetU32(a + "context_length", c.n_ctx_train);
  w->SetU32(a + "embedding_length", static_cast<uint32_t>(c.n_embd));
  w->SetU32(a + "block_count", static_cast<uint32_t>(c.n_layer_all()));
  w->SetU32(a + "attention.head_count", static_cast<uint32_t>(c.n_head));
  w->Set(a + "attention.head_count_kv", gguf::MakeI32Array(kv));
  w->SetF32(a + "rope.freq_base", c.rope_base);
  w->SetF32(a + "attention.layer_norm_rms_epsilon", c.eps);
  w->SetU32(a + "vocab_size", static_cast<uint32_t>(c.n_vocab));
  w->SetU32(a + "shortconv.l_cache", static_cast<uint32_t>(c.ssm_conv));
  w->SetU32(a + "feed_forward_length", static_cast<uint32_t>(c.n_ff));
  if (c.arch == "lfm2moe") {  // conversion/lfm2.py LFM2MoeModel
    w->SetU32(a + "expert_count", static_cast<uint32_t>(c.n_expert));
    w->SetU32(a + "expert_used_count", static_cast<uint32_t>(c.n_expert_used));
    w->SetU32(a + "expert_feed_forward_length", static_cast<uint32_t>(c.n_ff_exp));
    w->SetU32(a + "leading_dense_block_count", static_cast<uint32_t>(c.n_dense_lead));
    w->SetU32(a + "expert_gating_func", 2);  // sigmoid
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
      const int64_t X = c.n_expert, Fe = c.n_ff_exp;
      p.Add(il, "ffn_gate_inp", {E, X}, Init::kNormal, 0, 2.5 / std::sqrt(static_cast<double>(E)), true);
      p.Add(il, "exp_probs_b", {X}, Init::kNormal, 0, 0.1, true, ".bias");
      p.Matrix(il, "ffn_gate_exps", {E, Fe, X}, InStd(E));
      p.Matrix(il, "ffn_up_exps", {E, Fe, X}, InStd(E));
      p.Matrix(il, "ffn_down_exps", {Fe, E, X}, ResidualStd(Fe));
      continue;
    }
    p.Matrix(il, "ffn_gate", {E, F}, InStd(E));
    p.Matrix(il, "ffn_up", {E, F}, InStd(E));
    p.Matrix(il, "ffn_down", {F, E}, ResidualStd(F));
  }
  return t;
}

}  // namespace rw::modelgen
