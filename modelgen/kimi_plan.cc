// kimi-linear generator: llama.cpp v0.5.0 names and shapes (llama_model_kimi_linear::load_arch_tensors, the MLA
// with the split kv_b: attn_k_b / attn_v_b), metadata as conversion/kimi_linear.py writes it: per-layer
// attention.head_count_kv (1: MLA as MQA, 0: KDA), kda.head_dim, ssm.conv_kernel, the MLA sizes, the leading
// dense blocks and the sigmoid-routed MoE (expert_gating_func 2) with shared experts.
#include <algorithm>

#include "modelgen/planner.h"

namespace rw::modelgen {

void KimiLinearMetadata(const ModelConfig& c, gguf::Writer* w) {
  ArchKeys k(c, w);
  k.Sizes();
  k.U32("feed_forward_length", c.n_ff);
  k.U32("attention.head_count", c.n_head);
  k.KvPerLayer(1);
  k.F32("attention.layer_norm_rms_epsilon", c.eps);
  k.U32("vocab_size", c.n_vocab);
  k.U32("ssm.conv_kernel", c.ssm_conv);
  k.U32("kda.head_dim", c.ssm_state);
  k.U32("attention.kv_lora_rank", c.kv_lora_rank);
  k.U32("rope.dimension_count", c.n_rot);
  k.U32("attention.key_length", c.kv_lora_rank + c.n_rot);
  k.U32("attention.value_length", c.kv_lora_rank);
  k.U32("attention.key_length_mla", c.mla_k);
  k.U32("attention.value_length_mla", c.mla_v);
  k.Experts();
  k.U32("expert_shared_count", c.n_expert_shared);
  k.U32("leading_dense_block_count", c.n_dense_lead);
  k.F32("expert_weights_scale", c.expert_weights_scale);
  k.U32("expert_gating_func", 2);  // sigmoid
}

std::vector<TensorSpec> KimiLinearPlan(const ModelConfig& c) {
  std::vector<TensorSpec> t;
  Planner p(&t);
  const int64_t E = c.n_embd, V = c.n_vocab, H = c.n_head, S = c.ssm_state, D = S * H, F = c.n_ff;
  const int64_t R = c.kv_lora_rank, rope = c.n_rot, nope = c.mla_k - rope, Vh = c.mla_v;
  p.EmbeddingAndHead(E, V, c.tied, "output_norm", 4.0 / std::sqrt(static_cast<double>(E)));
  for (int64_t il = 0; il < c.n_layer; ++il) {
    p.Gain(il, "attn_norm", E);
    if (c.IsRecurrent(il)) {
      for (const char* m : {"attn_q", "attn_k", "attn_v"}) p.Matrix(il, m, {E, D}, InStd(E));
      for (const char* m : {"ssm_conv1d_q", "ssm_conv1d_k", "ssm_conv1d_v"})
        p.Add(il, m, {c.ssm_conv, 1, D}, Init::kNormal, 0, 0.5, true);
      p.Matrix(il, "ssm_f_a", {E, S}, InStd(E));
      p.Matrix(il, "ssm_f_b", {S, D}, 0.5 * InStd(S));
      p.Matrix(il, "ssm_beta", {E, H}, InStd(E));
      p.Add(il, "ssm_a", {1, H}, Init::kSsmA, 0, 0, true, "");
      p.Add(il, "ssm_dt", {D}, Init::kDtBias, 0, 0, true, ".bias");
      p.Matrix(il, "ssm_g_a", {E, S}, InStd(E));
      p.Matrix(il, "ssm_g_b", {S, D}, InStd(S));
      p.Gain(il, "ssm_norm", S);
      p.Matrix(il, "attn_output", {D, E}, ResidualStd(D));
    } else {
      p.Matrix(il, "attn_q", {E, H * c.mla_k}, InStd(E));
      p.Matrix(il, "attn_kv_a_mqa", {E, R + rope}, InStd(E));
      p.Gain(il, "attn_kv_a_norm", R);
      p.Matrix(il, "attn_k_b", {nope, R, H}, InStd(nope));
      p.Matrix(il, "attn_v_b", {R, Vh, H}, InStd(R));
      p.Matrix(il, "attn_output", {H * Vh, E}, ResidualStd(H * Vh));
    }
    p.Gain(il, "ffn_norm", E);
    if (il < c.n_dense_lead) {
      p.SwiGlu(il, "", E, F);
      continue;
    }
    p.Router(il, E, c.n_expert, /*bias=*/true);
    p.SwiGlu(il, "_exps", E, c.n_ff_exp, c.n_expert);
    p.SwiGlu(il, "_shexp", E, c.n_ff_exp * std::max<int64_t>(1, c.n_expert_shared));
  }
  return t;
}

}  // namespace rw::modelgen
