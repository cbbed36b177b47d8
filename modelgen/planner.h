// Internal to modelgen/: the weight scales of the fixture generator, the tensor-list builder and the metadata
// writer shared by the architecture plans (tensor_plan.cc, nemotron_plan.cc, lfm2_plan.cc, kimi_plan.cc).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "modelgen/tensor_plan.h"

namespace rw::modelgen {

// Weight scales of the fixture generator (README section 2.1).
inline double InStd(int64_t fan_in) { return 1.0 / std::sqrt(static_cast<double>(fan_in)); }
inline double ResidualStd(int64_t fan_in) { return 0.5 / std::sqrt(static_cast<double>(fan_in)); }

class Planner {
 public:
  explicit Planner(std::vector<TensorSpec>* out) : out_(*out) {}

  // A matrix {fan_in, rows...} drawn from N(0, std^2).
  void Matrix(int64_t layer, const std::string& kind, std::vector<int64_t> ne, double std) {
    Add(layer, kind, std::move(ne), Init::kNormal, 0, std, false);
  }
  // Norm gain N(1, 0.1^2), F32.
  void Gain(int64_t layer, const std::string& kind, int64_t n) {
    Add(layer, kind, {n}, Init::kNormal, 1, 0.1, true);
  }
  // token_embd, then the final norm `norm_kind` and, untied, the output matrix. A tied head gets zero-mean
  // norm gains of std out_scale instead, which keep logits at std ~4 (README 2.1).
  void EmbeddingAndHead(int64_t embd, int64_t vocab, bool tied, const std::string& norm_kind, double out_scale) {
    Matrix(-1, "token_embd", {embd, vocab}, 1.0);
    if (tied) {
      Add(-1, norm_kind, {embd}, Init::kNormal, 0, out_scale, true);
    } else {
      Gain(-1, norm_kind, embd);
      Matrix(-1, "output", {embd, vocab}, out_scale);
    }
  }
  // ffn_gate<sfx> and ffn_up<sfx> {E, F(, X)}, ffn_down<sfx> {F, E(, X)}: a SwiGLU FFN (sfx ""), its experts
  // ("_exps", X > 0) or its shared expert ("_shexp").
  void SwiGlu(int64_t layer, const std::string& sfx, int64_t E, int64_t F, int64_t X = 0) {
    auto ne = [X](int64_t a, int64_t b) {
      return X > 0 ? std::vector<int64_t>{a, b, X} : std::vector<int64_t>{a, b};
    };
    Matrix(layer, "ffn_gate" + sfx, ne(E, F), InStd(E));
    Matrix(layer, "ffn_up" + sfx, ne(E, F), InStd(E));
    Matrix(layer, "ffn_down" + sfx, ne(F, E), ResidualStd(F));
  }
  // The MoE router ffn_gate_inp {E, X} (F32), with the sigmoid router's selection bias exp_probs_b when bias.
  void Router(int64_t layer, int64_t E, int64_t X, bool bias) {
    Add(layer, "ffn_gate_inp", {E, X}, Init::kNormal, 0, 2.5 / std::sqrt(static_cast<double>(E)), true);
    if (bias) Add(layer, "exp_probs_b", {X}, Init::kNormal, 0, 0.1, true, ".bias");
  }
  void Add(int64_t layer, const std::string& kind, std::vector<int64_t> ne, Init init, double mean,
           double std, bool keep_f32, const char* suffix = ".weight") {
    TensorSpec t;
    t.name = (layer >= 0 ? "blk." + std::to_string(layer) + "." : std::string()) + kind + suffix;
    t.ne = std::move(ne);
    t.init = init;
    t.mean = mean;
    t.std = std;
    t.keep_f32 = keep_f32 || t.ne.size() == 1;
    t.layer = layer;
    t.kind = kind;
    out_.push_back(std::move(t));
  }

 private:
  std::vector<TensorSpec>& out_;
};

// Writes the "<arch>." metadata keys, and the groups of keys several converters write alike, in their order.
class ArchKeys {
 public:
  ArchKeys(const ModelConfig& c, gguf::Writer* w) : c_(c), w_(*w), a_(c.arch + ".") {}

  void U32(const std::string& key, int64_t v) { w_.SetU32(a_ + key, static_cast<uint32_t>(v)); }
  void F32(const std::string& key, float v) { w_.SetF32(a_ + key, v); }
  void Set(const std::string& key, gguf::Value v) { w_.Set(a_ + key, std::move(v)); }
  // context_length, embedding_length, block_count.
  void Sizes() {
    U32("context_length", c_.n_ctx_train);
    U32("embedding_length", c_.n_embd);
    U32("block_count", c_.n_layer_all());
  }
  // attention.head_count_kv per layer: kv on attention layers, 0 on the others.
  void KvPerLayer(int64_t kv) {
    std::vector<int32_t> v;
    for (int64_t i = 0; i < c_.n_layer_all(); ++i) v.push_back(c_.IsAttention(i) ? static_cast<int32_t>(kv) : 0);
    Set("attention.head_count_kv", gguf::MakeI32Array(v));
  }
  // expert_count, expert_used_count, expert_feed_forward_length.
  void Experts() {
    U32("expert_count", c_.n_expert);
    U32("expert_used_count", c_.n_expert_used);
    U32("expert_feed_forward_length", c_.n_ff_exp);
  }
  // ssm.conv_kernel, state_size, group_count, then inner_size and time_step_rank (the rank first: rank_first).
  void Ssm(bool rank_first) {
    U32("ssm.conv_kernel", c_.ssm_conv);
    U32("ssm.state_size", c_.ssm_state);
    U32("ssm.group_count", c_.ssm_groups);
    if (rank_first) U32("ssm.time_step_rank", c_.ssm_dt_rank);
    U32("ssm.inner_size", c_.ssm_inner());
    if (!rank_first) U32("ssm.time_step_rank", c_.ssm_dt_rank);
  }

 private:
  const ModelConfig& c_;
  gguf::Writer& w_;
  const std::string a_;
};

// nemotron_h (nemotron_plan.cc).
void NemotronHMetadata(const ModelConfig& c, gguf::Writer* w);
std::vector<TensorSpec> NemotronHPlan(const ModelConfig& c);  // also granitehybrid
void GraniteHybridMetadata(const ModelConfig& c, gguf::Writer* w);
// lfm2 (lfm2_plan.cc).
void Lfm2Metadata(const ModelConfig& c, gguf::Writer* w);
std::vector<TensorSpec> Lfm2Plan(const ModelConfig& c);
// kimi-linear (kimi_plan.cc).
void KimiLinearMetadata(const ModelConfig& c, gguf::Writer* w);
std::vector<TensorSpec> KimiLinearPlan(const ModelConfig& c);

}  // namespace rw::modelgen
