// Architecture specs for generated models: qwen35, qwen35moe, qwen3next. llama.cpp v0.5.0 names and shapes
// (../shared/spec/model-qwen35.md sections 2 and 5), key and tensor order as in the fixtures
// (../shared/fixtures/llama-ref/README.md sections 2.3, 2.4).
#include "modelgen/tensor_plan.h"

#include <cmath>

#include "modelgen/planner.h"

namespace rw::modelgen {

int64_t TensorSpec::rows() const {
  int64_t r = 1;
  for (size_t d = 1; d < ne.size(); ++d) r *= ne[d];
  return r;
}

namespace {

void Qwen35Metadata(const ModelConfig& c, gguf::Writer* w) {
  ArchKeys k(c, w);
  k.Sizes();
  k.U32("feed_forward_length", c.n_ff);
  k.U32("attention.head_count", c.n_head);
  k.U32("attention.head_count_kv", c.n_head_kv);
  k.U32("attention.key_length", c.head_dim);
  k.U32("attention.value_length", c.head_dim);
  k.F32("rope.freq_base", c.rope_base);
  k.U32("rope.dimension_count", c.n_rot);
  if (c.has_rope_sections()) {
    k.Set("rope.dimension_sections", gguf::MakeI32Array({c.rope_sections[0], c.rope_sections[1],
                                                         c.rope_sections[2], c.rope_sections[3]}));
  }
  k.F32("attention.layer_norm_rms_epsilon", c.eps);
  if (c.is_moe()) {
    k.Experts();
    k.U32("expert_shared_feed_forward_length", c.n_ff_shexp);
  }
  k.Ssm(/*rank_first=*/true);
  std::vector<bool> recurrent;
  for (int64_t i = 0; i < c.n_layer_all(); ++i) recurrent.push_back(c.IsRecurrent(i));
  if (c.write_recurrent_layers) k.Set("attention.recurrent_layers", gguf::MakeBoolArray(recurrent));
  k.U32("full_attention_interval", c.full_attention_interval);
  if (c.n_nextn > 0) k.U32("nextn_predict_layers", c.n_nextn);
}

std::vector<TensorSpec> Qwen35Plan(const ModelConfig& c) {
  std::vector<TensorSpec> t;
  Planner p(&t);
  const int64_t E = c.n_embd, V = c.n_vocab, D = c.head_dim, S = c.ssm_state;
  const int64_t Vd = c.ssm_inner(), C = c.ssm_conv_dim(), Hv = c.ssm_dt_rank, F = c.n_ff;
  const double out_scale = 4.0 / std::sqrt(static_cast<double>(E));

  p.EmbeddingAndHead(E, V, c.tied, "output_norm", out_scale);
  for (int64_t il = 0; il < c.n_layer_all(); ++il) {
    p.Gain(il, "attn_norm", E);
    p.Gain(il, "post_attention_norm", E);
    if (c.IsRecurrent(il)) {
      p.Matrix(il, "attn_qkv", {E, C}, InStd(E));
      p.Matrix(il, "attn_gate", {E, Vd}, InStd(E));
      p.Add(il, "ssm_conv1d", {c.ssm_conv, C}, Init::kNormal, 0, 0.5, true);
      p.Add(il, "ssm_dt", {Hv}, Init::kDtBias, 0, 0, true, ".bias");
      p.Add(il, "ssm_a", {Hv}, Init::kSsmA, 0, 0, true, "");
      if (c.arch == "qwen3next") {
        p.Add(il, "ssm_ba", {E, 2 * Hv}, Init::kSsmBa, 0, InStd(E), false);
        t.back().group_rows = Hv / c.ssm_groups;
      } else {
        p.Matrix(il, "ssm_beta", {E, Hv}, InStd(E));
        p.Matrix(il, "ssm_alpha", {E, Hv}, 0.5 * InStd(E));
      }
      p.Gain(il, "ssm_norm", S);
      p.Matrix(il, "ssm_out", {Vd, E}, ResidualStd(Vd));
    } else {
      p.Matrix(il, "attn_q", {E, 2 * D * c.n_head}, InStd(E));
      p.Matrix(il, "attn_k", {E, D * c.n_head_kv}, InStd(E));
      p.Matrix(il, "attn_v", {E, D * c.n_head_kv}, InStd(E));
      p.Matrix(il, "attn_output", {D * c.n_head, E}, ResidualStd(D * c.n_head));
      p.Gain(il, "attn_q_norm", D);
      p.Gain(il, "attn_k_norm", D);
    }
    if (c.is_moe()) {
      p.Router(il, E, c.n_expert, /*bias=*/false);
      p.SwiGlu(il, "_exps", E, c.n_ff_exp, c.n_expert);
      p.Add(il, "ffn_gate_inp_shexp", {E}, Init::kNormal, 0, InStd(E), true);
      p.SwiGlu(il, "_shexp", E, c.n_ff_shexp);
    } else {
      p.SwiGlu(il, "", E, F);
    }
    if (il >= c.n_layer) {  // MTP block
      p.Matrix(il, "nextn.eh_proj", {2 * E, E}, InStd(2 * E));
      p.Gain(il, "nextn.enorm", E);
      p.Gain(il, "nextn.hnorm", E);
      p.Gain(il, "nextn.shared_head_norm", E);
    }
  }
  return t;
}

const ArchSpec kArchs[] = {
    // One plan for the family: the MoE FFN replaces the dense one when n_expert > 0, and qwen3next has the
    // fused
    // ssm_ba instead of ssm_beta / ssm_alpha and no rope.dimension_sections.
    {"qwen35", Qwen35Metadata, Qwen35Plan},
    {"qwen35moe", Qwen35Metadata, Qwen35Plan},
    {"qwen3next", Qwen35Metadata, Qwen35Plan},
    {"nemotron_h", NemotronHMetadata, NemotronHPlan},
    {"nemotron_h_moe", NemotronHMetadata, NemotronHPlan},
    {"granitehybrid", GraniteHybridMetadata, NemotronHPlan},
    {"lfm2", Lfm2Metadata, Lfm2Plan},
    {"lfm2moe", Lfm2Metadata, Lfm2Plan},
    {"kimi-linear", KimiLinearMetadata, KimiLinearPlan},
};

}  // namespace

const ArchSpec* FindArch(const std::string& arch) {
  for (const ArchSpec& a : kArchs) {
    if (arch == a.arch) return &a;
  }
  return nullptr;
}

}  // namespace rw::modelgen
