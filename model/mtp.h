// The MTP / NextN head of a Qwen3.5-family GGUF (spec model-qwen35.md section 8.1): one extra block (index
// il = n_layer) that predicts token p+2 from the token at p+1 and the trunk's final normed hidden row at p.
//   e = RMSNorm(Emb[x]; enorm), hh = RMSNorm(hin; hnorm), u = eh_proj · [e; hh]
//   u += GatedAttention(RMSNorm(u; attn_norm))   (own attention KV: one layer, positions of the trunk)
//   u += FFN(RMSNorm(u; post_attention_norm))
//   hn = RMSNorm(u; shared_head_norm | output_norm), logits = (shared_head_head | output) · hn
// The block reuses the trunk's attention and FFN code, so a row's result depends only on its own inputs and
// the KV rows before it (invariant I1: batch splits and thread counts change no bit).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "base/expected.h"
#include "kernels/thread_pool.h"
#include "model/forward.h"
#include "model/kv_storage.h"
#include "model/weights.h"

namespace rw::model {

struct MtpWeights {
  Matrix embed;                      // {E, n_vocab}: nextn.embed_tokens, else token_embd
  const float* enorm = nullptr;      // [E]
  const float* hnorm = nullptr;      // [E]
  Matrix eh_proj;                    // {2E, E}: input [e (E) | hh (E)]
  LayerWeights block;                // attn_norm, post_norm, attn, ffn of block n_layer
  const float* head_norm = nullptr;  // [E]: nextn.shared_head_norm, else output_norm
  Matrix head;                       // {E, n_vocab}: nextn.shared_head_head, else output
};

// Binds the first MTP block (il = n_layer) of `file` with the trunk's shape checks. Unsupported when the
// model has no NextN block; errors name the missing or misshaped tensor.
Expected<MtpWeights> BindMtpWeights(const gguf::File& file, const ModelConfig& cfg, const Weights& trunk);

// Rows of one sequence: tokens[i] at position pos0 + i, paired with the incoming hidden row hidden[i] (the
// trunk's hN at position pos0 + i - 1, or the MTP's own hn of the previous draft step).
struct MtpRows {
  std::span<const int32_t> pages;  // page table of the MTP KV: must cover [0, pos0 + n)
  int32_t pos0 = 0;
  std::span<const int32_t> tokens;  // [n]
  std::span<const float> hidden;    // [n][E]
};

enum class MtpOutputs {
  kKvOnly,   // only write the K/V rows (keeping the MTP cache in sync with the target); no FFN, no head
  kLastRow,  // hn and logits of the last row
  kAllRows,  // hn and logits of every row
};

struct MtpOutput {
  int32_t n_vocab = 0;
  int32_t n_embd = 0;
  std::vector<float> hn;      // [n_out][E] the MTP's own normed hidden rows
  std::vector<float> logits;  // [n_out][n_vocab]
};

class MtpHead {
 public:
  // Binds the target's NextN block; the head borrows the target's file mapping and config (it must outlive
  // this).
  static Expected<std::unique_ptr<MtpHead>> Create(const Model& target);
  MtpHead(const MtpHead&) = delete;
  MtpHead& operator=(const MtpHead&) = delete;

  const ModelConfig& config() const { return cfg_; }
  const MtpWeights& weights() const { return w_; }
  // KV storage for the MTP block: one attention layer.
  KvStorageConfig MakeKvConfig(int32_t n_pages, int32_t page_size = 32, KvTypes type = KvType::kF16) const;

  // Runs the rows, writing their K/V rows at [pos0, pos0 + n); attention reads K/V rows [0, p] for the row at
  // p. Input errors (bad token, hidden size, page table too short, KV not shaped for the head) change
  // nothing.
  Status Forward(const MtpRows& rows, KvStorage& kv, MtpOutputs outputs, MtpOutput* out,
                 kernels::ThreadPool* pool) const;

  // Drafting only: logits for token ids [0, n) instead of the whole vocabulary (MtpOutput::n_vocab becomes n;
  // 0 or n >= n_vocab = all). BPE ids are ordered by merge rank, so the low ids are the frequent tokens; the
  // head's matmul, the largest part of a drafted token's cost, shrinks by n_vocab / n.
  void LimitVocabulary(int32_t n) { head_rows_ = n; }

 private:
  MtpHead() = default;
  ModelConfig cfg_;
  MtpWeights w_;
  int32_t head_rows_ = 0;
};

}  // namespace rw::model
