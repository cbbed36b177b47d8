// Hyperparameters of the Mamba-2 hybrids, read like llama.cpp v0.5.0's llama_model_nemotron_h and
// llama_model_granite_hybrid.
#include "model/config_mamba.h"

#include <vector>

namespace rw::model::internal {
namespace {

// The one value the layers of a kind share (0 if none has the feature); differing values are unsupported.
Expected<int32_t> Common(const std::vector<int32_t>& v, const std::vector<LayerKind>& kinds, LayerKind k,
                         const std::string& key) {
  int32_t value = 0;
  for (size_t i = 0; i < kinds.size(); ++i) {
    if (kinds[i] != k || v[i] == 0) continue;
    if (value != 0 && v[i] != value)
      return Error::Unsupported("metadata key '" + key + "': per-layer values that differ are not supported");
    value = v[i];
  }
  return value;
}

}  // namespace

Status ReadMamba2Hybrid(const gguf::File& f, ModelConfig* out) {
  ModelConfig& c = *out;
  const std::string& a = c.arch_name;
  REWIND_ASSIGN_OR_RETURN(c.n_ctx_train, ReqU32(f, Key(a, "context_length")));
  REWIND_ASSIGN_OR_RETURN(c.n_embd, ReqU32(f, Key(a, "embedding_length")));
  REWIND_ASSIGN_OR_RETURN(c.n_layer_all, ReqU32(f, Key(a, "block_count")));
  REWIND_ASSIGN_OR_RETURN(c.n_nextn, OptU32(f, Key(a, "nextn_predict_layers"), 0));
  if (c.n_nextn > c.n_layer_all)
    return Error::InvalidArgument(a + ".nextn_predict_layers exceeds block_count");
  c.n_layer = c.n_layer_all - c.n_nextn;
  // nemotron_h requires layer_norm_epsilon and uses layer_norm_rms_epsilon when present; granitehybrid
  // requires layer_norm_rms_epsilon.
  const bool granite = c.arch == Arch::kGraniteHybrid;
  const std::string ln =
      Key(a, granite ? "attention.layer_norm_rms_epsilon" : "attention.layer_norm_epsilon");
  if (!f.Has(ln)) return Error::NotFound("required metadata key '" + ln + "' is missing");
  REWIND_ASSIGN_OR_RETURN(c.eps, f.GetF32(ln));
  REWIND_ASSIGN_OR_RETURN(c.eps, OptF32(f, Key(a, "attention.layer_norm_rms_epsilon"), c.eps));

  REWIND_ASSIGN_OR_RETURN(std::vector<int32_t> heads,
                          PerLayer(f, Key(a, "attention.head_count"), c.n_layer_all));
  std::vector<int32_t> kv_heads = heads;  // default: head_count
  if (f.Has(Key(a, "attention.head_count_kv"))) {
    REWIND_ASSIGN_OR_RETURN(kv_heads, PerLayer(f, Key(a, "attention.head_count_kv"), c.n_layer_all));
  }
  REWIND_ASSIGN_OR_RETURN(std::vector<int32_t> ff, PerLayer(f, Key(a, "feed_forward_length"), c.n_layer_all));
  c.kinds.resize(c.n_layer);
  c.kind_index.resize(c.n_layer);
  int32_t n_rec = 0, n_attn = 0, n_ffn = 0;
  for (int32_t i = 0; i < c.n_layer; ++i) {
    if (granite) {
      c.kinds[i] = kv_heads[i] == 0 ? LayerKind::kMamba2 : LayerKind::kAttention;
      c.kind_index[i] = kv_heads[i] == 0 ? n_rec++ : n_attn++;
    } else if (kv_heads[i] == 0 && ff[i] == 0) {
      c.kinds[i] = LayerKind::kMamba2;
      c.kind_index[i] = n_rec++;
    } else if (ff[i] == 0) {
      c.kinds[i] = LayerKind::kAttention;
      c.kind_index[i] = n_attn++;
    } else {
      c.kinds[i] = LayerKind::kFfn;
      c.kind_index[i] = n_ffn++;
    }
  }
  REWIND_ASSIGN_OR_RETURN(c.n_head,
                          Common(heads, c.kinds, LayerKind::kAttention, Key(a, "attention.head_count")));
  REWIND_ASSIGN_OR_RETURN(
      c.n_head_kv, Common(kv_heads, c.kinds, LayerKind::kAttention, Key(a, "attention.head_count_kv")));
  if (granite) {
    REWIND_ASSIGN_OR_RETURN(c.n_ff, OptU32OrArr(f, Key(a, "feed_forward_length"), 0, c.n_layer_all));
  } else {
    REWIND_ASSIGN_OR_RETURN(c.n_ff, Common(ff, c.kinds, LayerKind::kFfn, Key(a, "feed_forward_length")));
  }
  if (n_attn > 0) {
    if (c.n_head <= 0) return Error::InvalidArgument(a + ": attention layers need attention.head_count > 0");
    REWIND_RETURN_IF_ERROR(ReadHeadDim(f, a, c.n_embd / c.n_head, &c));
    c.n_rot = c.head_dim - c.head_dim % 2;  // no RoPE in nemotron_h; kept valid for shared checks
    c.attn_gated = false;
    c.attn_rope = false;
  }
  if (granite) {
    // RoPE (llama.cpp ROPE_TYPE_NORM) unless rope.scaling.finetuned is false (Granite 4.0-H: no RoPE).
    const gguf::Value* ft = f.Find(Key(a, "rope.scaling.finetuned"));
    c.attn_rope = ft == nullptr || ft->type != gguf::ValueType::kBool || ft->u != 0;
    c.rope_adjacent = true;
    REWIND_ASSIGN_OR_RETURN(c.n_rot, OptU32(f, Key(a, "rope.dimension_count"), c.head_dim));
    REWIND_ASSIGN_OR_RETURN(c.rope_freq_base, OptF32(f, Key(a, "rope.freq_base"), 10000.0f));
    if (f.Has(Key(a, "rope.scaling.type")) || f.Has(Key(a, "rope.scaling.factor")))
      return Error::Unsupported(a + ": RoPE scaling is not supported for this architecture");
    REWIND_ASSIGN_OR_RETURN(c.attn_scale, OptF32(f, Key(a, "attention.scale"), 0.0f));
    REWIND_ASSIGN_OR_RETURN(c.embedding_scale, OptF32(f, Key(a, "embedding_scale"), 0.0f));
    REWIND_ASSIGN_OR_RETURN(c.residual_scale, OptF32(f, Key(a, "residual_scale"), 0.0f));
    REWIND_ASSIGN_OR_RETURN(c.logit_scale, OptF32(f, Key(a, "logit_scale"), 0.0f));
  }
  REWIND_ASSIGN_OR_RETURN(c.ssm_conv_kernel, ReqU32(f, Key(a, "ssm.conv_kernel")));
  REWIND_ASSIGN_OR_RETURN(c.ssm_inner, ReqU32(f, Key(a, "ssm.inner_size")));
  REWIND_ASSIGN_OR_RETURN(c.ssm_state, ReqU32(f, Key(a, "ssm.state_size")));
  REWIND_ASSIGN_OR_RETURN(c.ssm_heads, ReqU32(f, Key(a, "ssm.time_step_rank")));
  REWIND_ASSIGN_OR_RETURN(c.ssm_group, ReqU32(f, Key(a, "ssm.group_count")));
  if (c.arch == Arch::kNemotronHMoe) {
    REWIND_ASSIGN_OR_RETURN(c.n_expert, OptU32(f, Key(a, "expert_count"), 0));
    REWIND_ASSIGN_OR_RETURN(c.n_expert_used, OptU32OrArr(f, Key(a, "expert_used_count"), 0, c.n_layer_all));
    const int32_t def_f = c.n_expert_used > 0 ? c.n_ff / c.n_expert_used : 0;
    REWIND_ASSIGN_OR_RETURN(c.n_ff_exp,
                            OptU32OrArr(f, Key(a, "expert_feed_forward_length"), def_f, c.n_layer_all));
    REWIND_ASSIGN_OR_RETURN(c.n_ff_shexp, OptU32(f, Key(a, "expert_shared_feed_forward_length"), 0));
    if (const gguf::Value* v = f.Find(Key(a, "expert_weights_norm"));
        v != nullptr && v->type == gguf::ValueType::kBool)
      c.expert_weights_norm = v->u != 0;
    REWIND_ASSIGN_OR_RETURN(c.expert_weights_scale, OptF32(f, Key(a, "expert_weights_scale"), 0.0f));
    REWIND_ASSIGN_OR_RETURN(int32_t groups, OptU32(f, Key(a, "expert_group_count"), 1));
    if (groups > 1)
      return Error::Unsupported(a + ": expert groups (expert_group_count > 1) are not supported");
    if (f.Has(Key(a, "moe_latent_size")))
      return Error::Unsupported(a + ": latent MoE projections (moe_latent_size) are not supported");
  } else if (granite && f.Has(Key(a, "expert_count"))) {
    // llama.cpp v0.5.0 llama_model_granite_hybrid: experts of feed_forward_length rows, softmax router with
    // renormalised top-k weights (expert_weights_scale is not read), an optional ungated shared expert.
    REWIND_ASSIGN_OR_RETURN(c.n_expert, OptU32(f, Key(a, "expert_count"), 0));
    REWIND_ASSIGN_OR_RETURN(c.n_expert_used, OptU32OrArr(f, Key(a, "expert_used_count"), 0, c.n_layer_all));
    c.n_ff_exp = c.n_ff;
    REWIND_ASSIGN_OR_RETURN(c.n_ff_shexp, OptU32(f, Key(a, "expert_shared_feed_forward_length"), 0));
    REWIND_ASSIGN_OR_RETURN(int32_t groups, OptU32(f, Key(a, "expert_group_count"), 0));
    if (groups > 1)
      return Error::Unsupported(a + ": expert groups (expert_group_count > 1) are not supported");
  } else if (f.Has(Key(a, "expert_count"))) {
    return Error::Unsupported(a + ": mixture-of-experts layers are not supported for this architecture");
  }

  const gguf::TensorInfo* emb = f.FindTensor("token_embd.weight");
  if (emb == nullptr) return Error::NotFound("tensor 'token_embd.weight' is missing");
  c.n_vocab = static_cast<int32_t>(emb->ne[1]);
  return Status::Ok();
}

}  // namespace rw::model::internal
