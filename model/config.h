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

enum class Arch { kQwen35, kQwen35Moe, kQwen3Next, kNemotronH, kNemotronHMoe, kGraniteHybrid, kLfm2, kLfm2Moe, kKimiLinear };
const char* ArchName(Arch a);
// "qwen35, qwen35moe, qwen3next, nemotron_h, nemotron_h_moe, granitehybrid, lfm2, lfm2moe, kimi-linear": the
// architectures
// this build runs.
std::string SupportedArchs();

// Qwen, Granite and LFM2 blocks are [mixer (kGdn, kMamba2, kShortConv or kAttention) + FFN]; nemotron_h has one
// sub-layer per block: kMamba2, kAttention (plain, no RoPE) or kFfn (ReLU² MLP). kGdn, kMamba2 and kShortConv
// (LFM2's gated short convolution, a conv window only) and kKda (Kimi Delta Attention: the gated delta rule with
// one decay per key channel) are the recurrent kinds: they own state slots and replay-log rows, numbered
// together (kind_index) in layer order. kimi-linear's attention layers (kAttention) are MLA (mla_layer.cc).
enum class LayerKind { kGdn, kAttention, kMamba2, kFfn, kShortConv, kKda };
inline bool IsRecurrent(LayerKind k) {
  return k == LayerKind::kGdn || k == LayerKind::kMamba2 || k == LayerKind::kShortConv || k == LayerKind::kKda;
}
// One letter per kind for layer listings: G, A, M, F, C, K.
inline char KindLetter(LayerKind k) { return "GAMFCK"[static_cast<int>(k)]; }

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
  bool attn_gated = true;       // per-head output gate in attn_q (Qwen); false: plain attention
  bool attn_rope = true;        // RoPE on q and k (false: nemotron_h, no positional encoding)
  bool rope_adjacent = false;   // pairs (2i, 2i+1) (llama.cpp ROPE_TYPE_NORM, granitehybrid); else NeoX pairs
  float attn_scale = 0.0f;      // attention.scale (0: 1/sqrt(head_dim))
  // Granite multipliers (0: none): x0 = embedding · embedding_scale; each block output is scaled by
  // residual_scale before the residual add; logits / logit_scale.
  float embedding_scale = 0.0f, residual_scale = 0.0f, logit_scale = 0.0f;

  // Gated DeltaNet / Mamba-2 (the same GGUF keys). LFM2: ssm_conv_kernel = shortconv.l_cache, ssm_inner = E
  // (the conv channels), no heads.
  int32_t ssm_conv_kernel = 0;  // Kc
  int32_t ssm_state = 0;        // S (GDN head size) / N (Mamba-2 state size)
  int32_t ssm_group = 0;        // Hk (GDN key heads) / G (Mamba-2 B/C groups)
  int32_t ssm_heads = 0;        // Hv (GDN value heads) / H (Mamba-2 heads)
  int32_t ssm_inner = 0;        // Vd = Hv·S / d_inner = H·P

  // FFN.
  int32_t n_ff = 0;
  int32_t n_expert = 0;
  int32_t n_expert_used = 0;
  int32_t n_ff_exp = 0;         // F
  int32_t n_ff_shexp = 0;       // Fs
  int32_t n_layer_dense_lead = 0;     // lfm2moe: the first blocks have a dense FFN, the others a MoE
  bool expert_weights_norm = false;   // nemotron_h_moe, lfm2moe: renormalise the top-k sigmoid weights
  float expert_weights_scale = 0.0f;  // nemotron_h_moe: then multiply them (0 or 1: none)

  // kimi-linear MLA (absorbed form, no RoPE): the KV cache holds one row per token, [kv_a normed (R) | k_pe
  // (n_rot)] = head_dim (n_head_kv 1), as K and again as V; queries are [wk_b·q_nope (R) | q_pe (n_rot)].
  int32_t kv_lora_rank = 0;     // R
  int32_t mla_k = 0;            // key_length_mla: q/k head size nope + rope (the softmax scale 1/sqrt(mla_k))
  int32_t mla_v = 0;            // value_length_mla: v head size after wv_b
  int32_t n_expert_shared = 0;  // kimi-linear: shared experts (one SwiGLU of n_ff_exp · count)

  std::vector<LayerKind> kinds;       // [n_layer]
  std::vector<int32_t> kind_index;    // [n_layer] index among layers of the same kind (recurrent kinds: together)

  // Derived.
  int32_t ssm_key_dim() const { return ssm_state * ssm_group; }             // Kd (Mamba-2: G·N, one of B / C)
  int32_t ssm_conv_dim() const { return 2 * ssm_key_dim() + ssm_inner; }    // C (Mamba-2: x | B | C)
  // Rows of a head's recurrent state: S (GDN, [S][S]) or P = d_inner / H (Mamba-2, [P][N]); ssm_state columns.
  int32_t ssm_head_dim() const { return is_mamba2() ? ssm_inner / ssm_heads : ssm_state; }
  // Replay-log floats per token and recurrent layer: raw conv input + (b, a) per GDN head / dt per Mamba-2 head.
  // KDA: raw q|k|v + beta (H) + the gate projection f_b·f_a·x (H·S, before dt_bias and softplus).
  int32_t replay_row_floats() const {
    if (is_kimi()) return ssm_conv_dim() + ssm_heads + ssm_inner;
    return ssm_conv_dim() + (is_mamba2() ? 1 : 2) * ssm_heads;
  }
  int32_t n_recurrent_layers() const;
  int32_t n_gdn_layers() const { return qwen_blocks() ? n_recurrent_layers() : 0; }
  int32_t n_attn_layers() const;
  bool is_mamba2() const { return is_nemotron() || arch == Arch::kGraniteHybrid; }
  bool is_nemotron() const { return arch == Arch::kNemotronH || arch == Arch::kNemotronHMoe; }
  // Weights named and bound like the Qwen family (weights.cc); else the Mamba-2 hybrids (nemotron_weights.cc) or
  // LFM2 (lfm2_weights.cc).
  bool qwen_blocks() const { return !is_mamba2() && !is_lfm2() && !is_kimi(); }
  // kimi-linear: KDA (ssm_state = ssm.kda head size S, ssm_group = ssm_heads = H, ssm_inner = H·S, conv channels
  // q|k|v) and MLA layers, a dense SwiGLU FFN in the leading blocks, then a sigmoid-routed MoE with a shared
  // expert (config_kimi.cc, kimi_weights.cc).
  bool is_kimi() const { return arch == Arch::kKimiLinear; }
  bool is_lfm2() const { return arch == Arch::kLfm2 || arch == Arch::kLfm2Moe; }
  // The sigmoid-routed MoE with a selection bias (experts.cc): nemotron_h_moe (ReLU² experts, shared expert),
  // lfm2moe (SwiGLU experts, no shared expert).
  bool sigmoid_moe() const {
    return arch == Arch::kNemotronHMoe || arch == Arch::kLfm2Moe || arch == Arch::kKimiLinear;
  }
  bool is_moe() const { return arch == Arch::kQwen35Moe || arch == Arch::kQwen3Next; }
  // Granite 4.0-H-Tiny / -Small: a softmax-routed MoE of SwiGLU experts (feed_forward_length wide) plus an
  // ungated SwiGLU shared expert (expert_shared_feed_forward_length; 0: none) in every block.
  bool is_granite_moe() const { return arch == Arch::kGraniteHybrid && n_expert > 0; }
  // The softmax router, top-k, renormalised weights and SwiGLU experts of the Qwen MoE (ffn.cc).
  bool softmax_moe() const { return is_moe() || is_granite_moe(); }
  // Value head h uses key head KeyHead(h): h mod Hk (qwen35*, tiled) or floor(h / r) (qwen3next, grouped).
  int32_t KeyHead(int32_t h) const {
    return arch == Arch::kQwen3Next ? h / (ssm_heads / ssm_group) : h % ssm_group;
  }

  // Bytes: attention KV per token (all layers, K+V) for a cache type (the real row bytes of the block formats;
  // CheckKvTypes first); recurrent state per sequence (F32); replay log per token (F32 replay_row_floats per
  // recurrent layer).
  uint64_t KvBytesPerToken(kernels::KvTypes types) const;
  uint64_t StateBytesPerSeq() const;
  uint64_t ReplayBytesPerToken() const;

  static Expected<ModelConfig> FromGguf(const gguf::File& file);
  Status Validate() const;
};

}  // namespace rw::model
