// Hyperparameters of a generated model and the preset table: dense qwen35 presets and the MoE presets
// (qwen35moe, qwen3next); each architecture has an ArchSpec (tensor_plan.h).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "base/expected.h"

namespace rw::modelgen {

struct ModelConfig {
  std::string preset;           // "tiny"
  std::string arch = "qwen35";  // general.architecture
  std::string name;             // general.name
  int64_t n_vocab = 0;          // from the vocab file
  int64_t n_embd = 0;           // E
  int64_t n_layer = 0;          // trunk layers
  int64_t n_nextn = 1;          // MTP blocks appended after the trunk
  int64_t full_attention_interval = 4;
  bool write_recurrent_layers =
      true;  // {arch}.attention.recurrent_layers (the tiny-qwen35moe fixture omits it)
  int64_t n_head = 0, n_head_kv = 0, head_dim = 0;      // Hq, Hkv, D
  int64_t n_rot = 0;                                    // rotated dims per head
  std::array<int32_t, 4> rope_sections = {0, 0, 0, 0};  // IMROPE archs only (not written for qwen3next)
  float rope_base = 1e7f;
  int64_t ssm_conv = 4;     // Kc
  int64_t ssm_state = 0;    // S: GDN head size (keys and values)
  int64_t ssm_groups = 0;   // Hk: GDN key heads
  int64_t ssm_dt_rank = 0;  // Hv: GDN value heads
  int64_t n_ff = 0;         // dense FFN width (MoE archs: written as feed_forward_length, unused)
  bool tied = true;         // no output.weight
  float eps = 1e-6f;
  uint32_t n_ctx_train = 8192;
  uint64_t default_seed = 1;
  // MoE (qwen35moe / qwen3next); zero for dense models.
  int64_t n_expert = 0, n_expert_used = 0, n_ff_exp = 0, n_ff_shexp = 0;

  bool is_moe() const { return n_expert > 0; }
  bool has_rope_sections() const { return arch != "qwen3next"; }
  int64_t n_layer_all() const { return n_layer + n_nextn; }
  int64_t ssm_inner() const { return ssm_state * ssm_dt_rank; }             // Vd
  int64_t ssm_key_dim() const { return ssm_state * ssm_groups; }            // Kd
  int64_t ssm_conv_dim() const { return 2 * ssm_key_dim() + ssm_inner(); }  // C
  // GDN iff trunk layer and (i + 1) % interval != 0; MTP blocks are attention blocks.
  bool IsRecurrent(int64_t layer) const {
    return layer < n_layer && (layer + 1) % full_attention_interval != 0;
  }
  Status Validate() const;
};

struct Preset {
  const char* name;
  const char* summary;
  ModelConfig config;  // n_vocab filled in from the vocab file
};

// All presets, in help order.
const std::vector<Preset>& Presets();
Expected<ModelConfig> FindPreset(const std::string& name);
std::string PresetNames();  // "tiny, qwen3.5-0.8b, ..."

}  // namespace rw::modelgen
