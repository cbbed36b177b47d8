// Model hyperparameters read once from GGUF metadata (spec model-qwen35.md sections 2-4), strictly typed like
// llama.cpp, validated before any allocation, immutable afterwards.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "base/expected.h"
#include "gguf/gguf.h"
#include "kernels/kv_quant.h"

namespace rw::model {

enum class Arch { kQwen35, kQwen35Moe, kQwen3Next };
const char* ArchName(Arch a);
// "qwen35, qwen35moe, qwen3next": the architectures this build runs.
std::string SupportedArchs();

enum class LayerKind { kGdn, kAttention };

struct ModelConfig {
  Arch arch = Arch::kQwen35;
  std::string arch_name;
  std::string name;           // general.name (may be empty)
  int32_t n_ctx_train = 0;
  int32_t n_embd = 0;         // E
  int32_t n_layer_all = 0;    // block_count (trunk + MTP)
  int32_t n_nextn = 0;        // trailing MTP blocks
  int32_t n_layer = 0;        // trunk layers
  int32_t n_vocab = 0;        // rows of token_embd
  float eps = 0.0f;           // RMSNorm / L2 norm eps

  // Full attention.
  int32_t n_head = 0;         // Hq
  int32_t n_head_kv = 0;      // Hkv
  int32_t head_dim = 0;       // D
  int32_t n_rot = 0;
  float rope_freq_base = 10000.0f;
  float rope_freq_scale = 1.0f;
  bool rope_yarn = false;
  float rope_attn_factor = 1.0f;
  int32_t rope_n_ctx_orig = 0;
  bool imrope = false;
  std::array<int32_t, 4> rope_sections{0, 0, 0, 0};

  // Gated DeltaNet.
  int32_t ssm_conv_kernel = 0;  // Kc
  int32_t ssm_state = 0;        // S
  int32_t ssm_group = 0;        // Hk
  int32_t ssm_heads = 0;        // Hv
  int32_t ssm_inner = 0;        // Vd = Hv·S

  // FFN.
  int32_t n_ff = 0;
  int32_t n_expert = 0;
  int32_t n_expert_used = 0;
  int32_t n_ff_exp = 0;         // F
  int32_t n_ff_shexp = 0;       // Fs

  std::vector<LayerKind> kinds;       // [n_layer]
  std::vector<int32_t> kind_index;    // [n_layer] index among layers of the same kind

  // Derived.
  int32_t ssm_key_dim() const { return ssm_state * ssm_group; }             // Kd
  int32_t ssm_conv_dim() const { return 2 * ssm_key_dim() + ssm_inner; }    // C
  int32_t n_gdn_layers() const;
  int32_t n_attn_layers() const;
  bool is_moe() const { return arch != Arch::kQwen35; }
  // Value head h uses key head KeyHead(h): h mod Hk (qwen35*, tiled) or floor(h / r) (qwen3next, grouped).
  int32_t KeyHead(int32_t h) const {
    return arch == Arch::kQwen3Next ? h / (ssm_heads / ssm_group) : h % ssm_group;
  }

  // Bytes: attention KV per token (all layers, K+V) for a cache type (the real row bytes of the block formats;
  // CheckKvTypes first); recurrent state per sequence (F32); replay log per token (F32 qkv row + b + a per GDN
  // layer).
  uint64_t KvBytesPerToken(kernels::KvTypes types) const;
  uint64_t StateBytesPerSeq() const;
  uint64_t ReplayBytesPerToken() const;

  static Expected<ModelConfig> FromGguf(const gguf::File& file);
  Status Validate() const;
};

}  // namespace rw::model
