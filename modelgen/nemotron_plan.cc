// Mamba-2 hybrid generators: llama.cpp v0.5.0 names and shapes (load_arch_tensors of nemotron_h and
// granitehybrid), metadata as its converters write it. nemotron_h (conversion/nemotron.py): per-layer
// head_count_kv and feed_forward_length arrays make a layer Mamba-2 (both 0), attention (only
// feed_forward_length 0) or MLP. granitehybrid (conversion/granite.py): head_count_kv 0 = Mamba-2, a SwiGLU
// FFN in every block, Granite's multipliers, rope.scaling.finetuned as the RoPE switch.
#include "modelgen/planner.h"

namespace rw::modelgen {

void NemotronHMetadata(const ModelConfig& c, gguf::Writer* w) {
  ArchKeys k(c, w);
  std::vector<int32_t> ff;
  for (int64_t i = 0; i < c.n_layer_all(); ++i)
    ff.push_back(!c.IsAttention(i) && !c.IsRecurrent(i) ? static_cast<int32_t>(c.n_ff) : 0);
  k.Sizes();
  k.Set("feed_forward_length", gguf::MakeI32Array(ff));
  k.U32("attention.head_count", c.n_head);
  k.KvPerLayer(c.n_head_kv);
  k.U32("attention.key_length", c.head_dim);
  k.U32("attention.value_length", c.head_dim);
  k.F32("attention.layer_norm_epsilon", c.eps);
  k.F32("attention.layer_norm_rms_epsilon", c.eps);
  k.Ssm(/*rank_first=*/false);
  if (c.arch == "nemotron_h_moe") {
    k.U32("expert_used_count", c.n_expert_used);
    k.U32("expert_feed_forward_length", c.n_ff_exp);
    k.U32("expert_shared_feed_forward_length", c.n_ff_shexp);
    k.U32("expert_count", c.n_expert);
    k.U32("expert_shared_count", 1);
    k.Set("expert_weights_norm", gguf::MakeBool(true));
    k.F32("expert_weights_scale", c.expert_weights_scale);
    k.U32("expert_group_count", 1);
  }
}

void GraniteHybridMetadata(const ModelConfig& c, gguf::Writer* w) {
  ArchKeys k(c, w);
  k.Sizes();
  k.U32("feed_forward_length", c.n_ff);
  k.U32("attention.head_count", c.n_head);
  k.KvPerLayer(c.n_head_kv);
  k.F32("rope.freq_base", c.rope_base);
  k.F32("attention.layer_norm_rms_epsilon", c.eps);
  if (c.attention_scale != 0) k.F32("attention.scale", c.attention_scale);
  if (c.embedding_scale != 0) k.F32("embedding_scale", c.embedding_scale);
  if (c.residual_scale != 0) k.F32("residual_scale", c.residual_scale);
  if (c.logit_scale != 0) k.F32("logit_scale", c.logit_scale);
  k.Ssm(/*rank_first=*/false);
  k.Set("rope.scaling.finetuned", gguf::MakeBool(c.granite_rope));
  if (c.n_expert > 0) {  // conversion/granite.py GraniteMoeModel: feed_forward_length is the expert width
    k.U32("expert_count", c.n_expert);
    k.U32("expert_used_count", c.n_expert_used);
    if (c.n_ff_shexp > 0) k.U32("expert_shared_feed_forward_length", c.n_ff_shexp);
  }
}

std::vector<TensorSpec> NemotronHPlan(const ModelConfig& c) {
  std::vector<TensorSpec> t;
  Planner p(&t);
  const int64_t E = c.n_embd, V = c.n_vocab, D = c.head_dim, H = c.ssm_dt_rank, G = c.ssm_groups;
  const int64_t Di = c.ssm_inner(), C = c.ssm_conv_dim(), F = c.n_ff;
  const double out_scale = 4.0 / std::sqrt(static_cast<double>(E));
  p.EmbeddingAndHead(E, V, c.tied, "output_norm", out_scale);
  for (int64_t il = 0; il < c.n_layer; ++il) {
    p.Gain(il, "attn_norm", E);
    if (c.IsRecurrent(il)) {
      p.Matrix(il, "ssm_in", {E, 2 * Di + 2 * c.ssm_key_dim() + H}, InStd(E));
      p.Add(il, "ssm_conv1d", {c.ssm_conv, C}, Init::kNormal, 0, 0.5, true);
      p.Add(il, "ssm_conv1d", {C}, Init::kNormal, 0, 0.1, true, ".bias");
      p.Add(il, "ssm_dt", {H}, Init::kDtBias, 0, 0, true, ".bias");
      p.Add(il, "ssm_a", {1, H}, Init::kSsmA, 0, 0, true, "");
      p.Add(il, "ssm_d", {1, H}, Init::kNormal, 1, 0.1, true, "");
      p.Add(il, "ssm_norm", {Di / G, G}, Init::kNormal, 1, 0.1, true);
      p.Matrix(il, "ssm_out", {Di, E}, ResidualStd(Di));
    } else if (c.IsAttention(il)) {
      p.Matrix(il, "attn_q", {E, D * c.n_head}, InStd(E));
      p.Matrix(il, "attn_k", {E, D * c.n_head_kv}, InStd(E));
      p.Matrix(il, "attn_v", {E, D * c.n_head_kv}, InStd(E));
      p.Matrix(il, "attn_output", {D * c.n_head, E}, ResidualStd(D * c.n_head));
    } else if (c.arch == "nemotron_h_moe") {
      const int64_t X = c.n_expert, Fe = c.n_ff_exp, Fs = c.n_ff_shexp;
      p.Router(il, E, X, /*bias=*/true);
      p.Matrix(il, "ffn_up_exps", {E, Fe, X}, InStd(E));
      p.Matrix(il, "ffn_down_exps", {Fe, E, X}, 0.5 * ResidualStd(Fe));
      p.Matrix(il, "ffn_up_shexp", {E, Fs}, InStd(E));
      p.Matrix(il, "ffn_down_shexp", {Fs, E}, 0.5 * ResidualStd(Fs));
    } else {
      p.Matrix(il, "ffn_up", {E, F}, InStd(E));
      p.Matrix(il, "ffn_down", {F, E},
               0.5 * ResidualStd(F));  // relu(N(0,1))² has E[r²] = 1.5: half the scale
    }
    if (c.arch == "granitehybrid" && c.n_expert > 0) {  // every block: ffn_norm + softmax MoE + shared expert
      p.Gain(il, "ffn_norm", E);
      p.Router(il, E, c.n_expert, /*bias=*/false);
      p.SwiGlu(il, "_exps", E, F, c.n_expert);
      if (c.n_ff_shexp > 0) p.SwiGlu(il, "_shexp", E, c.n_ff_shexp);
    } else if (c.arch == "granitehybrid") {  // every block: ffn_norm + SwiGLU
      p.Gain(il, "ffn_norm", E);
      p.SwiGlu(il, "", E, F);
    }
  }
  return t;
}

}  // namespace rw::modelgen
