// Internal to modelgen/: the weight scales of the fixture generator and the tensor-list builder shared by the
// architecture plans (tensor_plan.cc, nemotron_plan.cc).
#pragma once

#include <cmath>
#include <string>
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
