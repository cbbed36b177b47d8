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
  // Mamba-2 hybrids (nemotron_h): one character per trunk layer, M = Mamba-2, * = attention, - = MLP, E = MoE
  // (Nemotron's hybrid_override_pattern); ssm_state = N, ssm_groups = G, ssm_dt_rank = H heads of mamba_head_dim.
  // LFM2: C = short convolution (ssm_conv = shortconv.l_cache), * = attention. kimi-linear: K = KDA, * = MLA.
  std::string layer_pattern;
  int64_t mamba_head_dim = 0;  // P
  // granitehybrid multipliers (written when non-zero) and RoPE switch (rope.scaling.finetuned).
  float embedding_scale = 0, residual_scale = 0, attention_scale = 0, logit_scale = 0;
  float expert_weights_scale = 0;  // nemotron_h_moe (renormalised top-k weights times this)
  bool granite_rope = false;

  bool is_moe() const { return n_expert > 0 && layer_pattern.empty(); }  // the Qwen MoE FFN in every block
  bool is_mamba2() const { return !layer_pattern.empty() && !is_lfm2() && !is_kimi(); }
  // kimi-linear: pattern K = KDA (n_head heads of ssm_state; ssm_groups = ssm_dt_rank = n_head), * = MLA
  // (n_head heads, kv_lora_rank latent, n_rot rope dims, mla_k = nope + n_rot, mla_v; head_dim = kv_lora_rank +
  // n_rot, n_head_kv 1: the cached row); n_dense_lead dense SwiGLU blocks, then a sigmoid-routed MoE with
  // n_expert_shared shared experts of n_ff_exp.
  bool is_kimi() const { return arch == "kimi-linear"; }
  int64_t kv_lora_rank = 0, mla_k = 0, mla_v = 0, n_expert_shared = 0;
  // LFM2: pattern C = short convolution, * = attention (q/k norms, NeoX RoPE); a SwiGLU FFN in every block.
  bool is_lfm2() const { return arch == "lfm2" || arch == "lfm2moe"; }
  int64_t n_dense_lead = 0;  // lfm2moe: leading blocks with a dense FFN (the others: sigmoid-routed MoE)
  bool has_rope_sections() const { return arch != "qwen3next"; }
  int64_t n_layer_all() const { return n_layer + n_nextn; }
  int64_t ssm_head_dim() const { return is_mamba2() ? mamba_head_dim : ssm_state; }  // rows of a head's state
  int64_t ssm_inner() const { return ssm_head_dim() * ssm_dt_rank; }  // Vd / d_inner
  int64_t ssm_key_dim() const { return ssm_state * ssm_groups; }      // Kd / G·N
  int64_t ssm_conv_dim() const { return is_lfm2() ? n_embd : 2 * ssm_key_dim() + ssm_inner(); }  // C
  // GDN iff trunk layer and (i + 1) % interval != 0 (MTP blocks are attention blocks); Mamba-2 hybrids: 'M'.
  bool IsRecurrent(int64_t layer) const {
    if (!layer_pattern.empty())
      return layer < n_layer &&
             (layer_pattern[layer] == 'M' || layer_pattern[layer] == 'C' || layer_pattern[layer] == 'K');
    return layer < n_layer && (layer + 1) % full_attention_interval != 0;
  }
  bool IsAttention(int64_t layer) const {
    if (!layer_pattern.empty()) return layer < n_layer && layer_pattern[layer] == '*';
    return !IsRecurrent(layer);
  }
  // Per sequence / per token sizes (F32 state and replay log, F16 KV).
  uint64_t StateBytesPerSeq() const;
  uint64_t ReplayBytesPerToken() const;
  uint64_t KvF16BytesPerToken() const;
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
