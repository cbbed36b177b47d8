// Hyperparameters of kimi-linear (Moonshot Kimi Linear), read like llama.cpp v0.5.0's
// llama_model_kimi_linear::load_arch_hparams and the generic loader: attention.head_count_kv per layer (0: KDA,
// else MLA), kda.head_dim, ssm.conv_kernel, the MLA sizes (attention.kv_lora_rank, key/value_length_mla,
// rope.dimension_count = the rope part of a head, unrotated: Kimi's MLA has no RoPE), the leading dense blocks
// and the sigmoid-routed MoE with shared experts.
#include <vector>

#include "model/config_mamba.h"

namespace rw::model::internal {

Status ReadKimiLinear(const gguf::File& f, ModelConfig* out) {
  ModelConfig& c = *out;
  const std::string& a = c.arch_name;
  REWIND_RETURN_IF_ERROR(ReadTrunkBasics(f, &c));
  if (!f.Has(Key(a, "attention.head_count")))
    return Error::NotFound("required metadata key '" + Key(a, "attention.head_count") + "' is missing");
  REWIND_ASSIGN_OR_RETURN(c.n_head, OptU32OrArr(f, Key(a, "attention.head_count"), 0, c.n_layer_all));
  REWIND_ASSIGN_OR_RETURN(std::vector<int32_t> kv,
                          PerLayer(f, Key(a, "attention.head_count_kv"), c.n_layer_all));

  // KDA: H heads of S (keys and values), conv windows on q, k and v.
  REWIND_ASSIGN_OR_RETURN(c.ssm_conv_kernel, ReqU32(f, Key(a, "ssm.conv_kernel")));
  REWIND_ASSIGN_OR_RETURN(c.ssm_state, ReqU32(f, Key(a, "kda.head_dim")));
  c.ssm_group = c.ssm_heads = c.n_head;
  c.ssm_inner = c.n_head * c.ssm_state;

  // MLA.
  REWIND_ASSIGN_OR_RETURN(c.kv_lora_rank, ReqU32(f, Key(a, "attention.kv_lora_rank")));
  REWIND_ASSIGN_OR_RETURN(c.mla_k, ReqU32(f, Key(a, "attention.key_length_mla")));
  REWIND_ASSIGN_OR_RETURN(c.mla_v, ReqU32(f, Key(a, "attention.value_length_mla")));
  REWIND_ASSIGN_OR_RETURN(c.n_rot, ReqU32(f, Key(a, "rope.dimension_count")));
  REWIND_ASSIGN_OR_RETURN(int32_t q_lora, OptU32(f, Key(a, "attention.q_lora_rank"), 0));
  if (q_lora > 0) return Error::Unsupported(a + ": a compressed MLA query (attention.q_lora_rank) is not supported");
  c.head_dim = c.kv_lora_rank + c.n_rot;  // one cache row per token: [kv_a normed | k_pe]
  c.attn_rope = false;
  c.attn_gated = false;

  // FFN: leading dense blocks, then the MoE.
  REWIND_ASSIGN_OR_RETURN(c.n_ff, OptU32OrArr(f, Key(a, "feed_forward_length"), 0, c.n_layer_all));
  REWIND_ASSIGN_OR_RETURN(c.n_layer_dense_lead, OptU32(f, Key(a, "leading_dense_block_count"), 0));
  REWIND_ASSIGN_OR_RETURN(c.n_expert, OptU32(f, Key(a, "expert_count"), 0));
  REWIND_ASSIGN_OR_RETURN(c.n_expert_used, OptU32OrArr(f, Key(a, "expert_used_count"), 0, c.n_layer_all));
  REWIND_ASSIGN_OR_RETURN(c.n_ff_exp, OptU32OrArr(f, Key(a, "expert_feed_forward_length"), 0, c.n_layer_all));
  REWIND_ASSIGN_OR_RETURN(c.n_expert_shared, OptU32(f, Key(a, "expert_shared_count"), 0));
  c.n_ff_shexp = c.n_ff_exp * (c.n_expert_shared > 0 ? c.n_expert_shared : 1);
  REWIND_ASSIGN_OR_RETURN(c.expert_weights_scale, OptF32(f, Key(a, "expert_weights_scale"), 0.0f));
  if (c.n_layer_dense_lead < c.n_layer) {
    REWIND_RETURN_IF_ERROR(RequireSigmoidRouter(f, a));
  }
  c.expert_weights_norm = true;  // build_moe_ffn(..., norm_w = true, ...)

  c.kinds.resize(c.n_layer);
  c.kind_index.resize(c.n_layer);
  int32_t n_rec = 0, n_attn = 0;
  for (int32_t i = 0; i < c.n_layer; ++i) {
    const bool kda = kv[i] == 0;
    c.kinds[i] = kda ? LayerKind::kKda : LayerKind::kAttention;
    c.kind_index[i] = kda ? n_rec++ : n_attn++;
  }
  c.n_head_kv = 1;  // MLA as MQA over the latent row

  const gguf::TensorInfo* emb = f.FindTensor("token_embd.weight");
  if (emb == nullptr) return Error::NotFound("tensor 'token_embd.weight' is missing");
  c.n_vocab = static_cast<int32_t>(emb->ne[1]);
  return Status::Ok();
}

Status ValidateKimi(const ModelConfig& c) {
  auto bad = [&](const std::string& m) { return Status(Error::InvalidArgument(c.arch_name + ": " + m)); };
  if (c.n_head <= 0) return bad("attention.head_count must be > 0");
  if (c.n_recurrent_layers() > 0) {
    if (c.ssm_conv_kernel < 2 || c.ssm_conv_kernel > 64) return bad("ssm.conv_kernel must be in 2..64");
    if (c.ssm_state <= 0 || c.ssm_state > 1024) return bad("kda.head_dim must be in 1..1024");
  }
  if (c.n_attn_layers() > 0) {
    if (c.kv_lora_rank <= 0) return bad("attention.kv_lora_rank must be > 0");
    if (c.mla_k <= c.n_rot || c.mla_v <= 0) return bad("key_length_mla must exceed rope.dimension_count, value_length_mla > 0");
  }
  if (c.n_layer_dense_lead > 0 && c.n_ff <= 0) return bad("feed_forward_length must be > 0");
  if (c.n_layer_dense_lead < c.n_layer) {
    if (c.n_expert <= 0) return bad("expert_count must be > 0");
    if (c.n_expert_used <= 0 || c.n_expert_used > c.n_expert) return bad("expert_used_count must be in 1..expert_count");
    if (c.n_ff_exp <= 0) return bad("expert_feed_forward_length must be > 0");
  }
  return Status::Ok();
}

}  // namespace rw::model::internal
