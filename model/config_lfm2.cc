// Hyperparameters of LFM2 (LiquidAI), read like llama.cpp v0.5.0's llama_model_lfm2::load_arch_hparams and
// the generic loader: attention.head_count_kv per layer (0: short convolution), shortconv.l_cache, one FFN
// width.
#include <vector>

#include "model/config_mamba.h"

namespace rw::model::internal {

Status ReadLfm2(const gguf::File& f, ModelConfig* out) {
  ModelConfig& c = *out;
  const std::string& a = c.arch_name;
  REWIND_RETURN_IF_ERROR(ReadTrunkBasics(f, &c));
  REWIND_ASSIGN_OR_RETURN(c.ssm_conv_kernel, ReqU32(f, Key(a, "shortconv.l_cache")));
  REWIND_ASSIGN_OR_RETURN(c.n_ff, OptU32OrArr(f, Key(a, "feed_forward_length"), 0, c.n_layer_all));
  c.n_layer_dense_lead = c.n_layer;  // lfm2: every block dense
  if (c.arch == Arch::kLfm2Moe) {
    // llama_model_lfm2moe: leading dense blocks, then build_moe_ffn with exp_probs_b, renormalised top-k
    // weights (expert_weights_scale is not read), SwiGLU experts, no shared expert.
    REWIND_ASSIGN_OR_RETURN(c.n_layer_dense_lead, OptU32(f, Key(a, "leading_dense_block_count"), 0));
    REWIND_ASSIGN_OR_RETURN(c.n_expert, OptU32(f, Key(a, "expert_count"), 0));
    REWIND_ASSIGN_OR_RETURN(c.n_expert_used, OptU32OrArr(f, Key(a, "expert_used_count"), 0, c.n_layer_all));
    REWIND_ASSIGN_OR_RETURN(c.n_ff_exp,
                            OptU32OrArr(f, Key(a, "expert_feed_forward_length"), 0, c.n_layer_all));
    REWIND_RETURN_IF_ERROR(RequireSigmoidRouter(f, a));
    c.expert_weights_norm = true;
  } else if (f.Has(Key(a, "expert_count"))) {
    return Error::Unsupported(a + ": mixture-of-experts layers are not supported for this architecture");
  }
  REWIND_ASSIGN_OR_RETURN(int32_t swa, OptU32(f, Key(a, "attention.sliding_window"), 0));
  if (swa > 0) return Error::Unsupported(a + ": sliding-window attention is not supported");
  if (const gguf::Value* v = f.Find(Key(a, "attention.causal"));
      v != nullptr && v->type == gguf::ValueType::kBool && v->u == 0)
    return Error::Unsupported(a + ": non-causal (embedding) models are not supported");

  if (!f.Has(Key(a, "attention.head_count")))
    return Error::NotFound("required metadata key '" + Key(a, "attention.head_count") + "' is missing");
  REWIND_ASSIGN_OR_RETURN(c.n_head, OptU32OrArr(f, Key(a, "attention.head_count"), 0, c.n_layer_all));
  REWIND_ASSIGN_OR_RETURN(std::vector<int32_t> kv,
                          PerLayer(f, Key(a, "attention.head_count_kv"), c.n_layer_all));
  if (!f.Has(Key(a, "attention.head_count_kv"))) kv.assign(c.n_layer_all, c.n_head);  // default: head_count
  c.kinds.resize(c.n_layer);
  c.kind_index.resize(c.n_layer);
  int32_t n_rec = 0, n_attn = 0;
  for (int32_t i = 0; i < c.n_layer; ++i) {
    const bool conv = kv[i] == 0;
    c.kinds[i] = conv ? LayerKind::kShortConv : LayerKind::kAttention;
    c.kind_index[i] = conv ? n_rec++ : n_attn++;
    if (!conv && c.n_head_kv != 0 && kv[i] != c.n_head_kv)
      return Error::Unsupported("metadata key '" + Key(a, "attention.head_count_kv") +
                                "': per-layer values that differ are not supported");
    if (!conv) c.n_head_kv = kv[i];
  }
  if (n_attn > 0) {
    if (c.n_head <= 0) return Error::InvalidArgument(a + ": attention layers need attention.head_count > 0");
    REWIND_RETURN_IF_ERROR(ReadHeadDim(f, a, c.n_embd / c.n_head, &c));
    REWIND_ASSIGN_OR_RETURN(c.n_rot, OptU32(f, Key(a, "rope.dimension_count"), c.head_dim));
    REWIND_ASSIGN_OR_RETURN(c.rope_freq_base, OptF32(f, Key(a, "rope.freq_base"), 10000.0f));
    if (f.Has(Key(a, "rope.scaling.type")) || f.Has(Key(a, "rope.scaling.factor")))
      return Error::Unsupported(a + ": RoPE scaling is not supported for this architecture");
    c.attn_gated = false;  // plain attention with q/k RMS norms and NeoX RoPE
    c.attn_rope = true;
  }
  c.ssm_inner = c.n_embd;  // conv channels: the B·x product, one per embedding dimension

  const gguf::TensorInfo* emb = f.FindTensor("token_embd.weight");
  if (emb == nullptr) return Error::NotFound("tensor 'token_embd.weight' is missing");
  c.n_vocab = static_cast<int32_t>(emb->ne[1]);
  return Status::Ok();
}

}  // namespace rw::model::internal
