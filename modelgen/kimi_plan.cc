// kimi-linear generator: llama.cpp v0.5.0 names and shapes (llama_model_kimi_linear::load_arch_tensors, the MLA
// with the split kv_b: attn_k_b / attn_v_b), metadata as conversion/kimi_linear.py writes it: per-layer
// attention.head_count_kv (1: MLA as MQA, 0: KDA), kda.head_dim, ssm.conv_kernel, the MLA sizes, the leading
// dense blocks and the sigmoid-routed MoE (expert_gating_func 2) with shared experts.
#include <algorithm>

#include "modelgen/planner.h"

namespace rw::modelgen {

void KimiLinearMetadata(const ModelConfig& c, gguf::Writer* w) {
  const std::string a = c.arch + ".";
  std::vector<int32_t> kv;
  for (int64_t i = 0; i < c.n_layer_all(); ++i) kv.push_back(c.IsAttention(i) ? 1 : 0);
  w->SetU32(a + "context_length", c.n_ctx_train);
  w->SetU32(a + "embedding_length", static_cast<uint32_t>(c.n_embd));
  w->SetU32(a + "block_count", static_cast<uint32_t>(c.n_layer_all()));
  w->SetU32(a + "feed_forward_length", static_cast<uint32_t>(c.n_ff));
  w->SetU32(a + "attention.head_count", static_cast<uint32_t>(c.n_head));
  w->Set(a + "attention.head_count_kv", gguf::MakeI32Array(kv));
  w->SetF32(a + "attention.layer_norm_rms_epsilon", c.eps);
  w->SetU32(a + "vocab_size", static_cast<uint32_t>(c.n_vocab));
  w->SetU32(a + "ssm.conv_kernel", static_cast<uint32_t>(c.ssm_conv));
  w->SetU32(a + "kda.head_dim", static_cast<uint32_t>(c.ssm_state));
  w->SetU32(a + "attention.kv_lora_rank", static_cast<uint32_t>(c.kv_lora_rank));
  w->SetU32(a + "rope.dimension_count", static_cast<uint32_t>(c.n_rot));
  w->SetU32(a + "attention.key_length", static_cast<uint32_t>(c.kv_lora_rank + c.n_rot));
  w->SetU32(a + "attention.value_length", static_cast<uint32_t>(c.kv_lora_rank));
  w->SetU32(a + "attention.key_length_mla", static_cast<uint32_t>(c.mla_k));
  w->SetU32(a + "attention.value_length_mla", static_cast<uint32_t>(c.mla_v));
  w->SetU32(a + "expert_count", static_cast<uint32_t>(c.n_expert));
  w->SetU32(a + "expert_used_count", static_cast<uint32_t>(c.n_expert_used));
  w->SetU32(a + "expert_feed_forward_length", static_cast<uint32_t>(c.n_ff_exp));
  w->SetU32(a + "expert_shared_count", static_cast<uint32_t>(c.n_expert_shared));
  w->SetU32(a + "leading_dense_block_count", static_cast<uint32_t>(c.n_dense_lead));
  w->SetF32(a + "expert_weights_scale", c.expert_weights_scale);
  w->SetU32(a + "expert_gating_func", 2);  // sigmoid
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
      p.Matrix(il, "ffn_gate", {E, F}, InStd(E));
      p.Matrix(il, "ffn_up", {E, F}, InStd(E));
      p.Matrix(il, "ffn_down", {F, E}, ResidualStd(F));
      continue;
    }
    const int64_t X = c.n_expert, Fe = c.n_ff_exp, Fs = Fe * std::max<int64_t>(1, c.n_expert_shared);
    p.Add(il, "ffn_gate_inp", {E, X}, Init::kNormal, 0, 2.5 / std::sqrt(static_cast<double>(E)), true);
    p.Add(il, "exp_probs_b", {X}, Init::kNormal, 0, 0.1, true, ".bias");
    p.Matrix(il, "ffn_gate_exps", {E, Fe, X}, InStd(E));
    p.Matrix(il, "ffn_up_exps", {E, Fe, X}, InStd(E));
    p.Matrix(il, "ffn_down_exps", {Fe, E, X}, ResidualStd(Fe));
    p.Matrix(il, "ffn_gate_shexp", {E, Fs}, InStd(E));
    p.Matrix(il, "ffn_up_shexp", {E, Fs}, InStd(E));
    p.Matrix(il, "ffn_down_shexp", {Fs, E}, ResidualStd(Fs));
  }
  return t;
}

}  // namespace rw::modelgen
