#include "model/config.h"

#include <cstdio>

#include "model/config_mamba.h"

namespace rw::model {
namespace internal {

std::string Key(const std::string& arch, const char* k) { return arch + "." + k; }

Expected<int32_t> ReqU32(const gguf::File& f, const std::string& key) {
  if (!f.Has(key)) return Error::NotFound("required metadata key '" + key + "' is missing");
  REWIND_ASSIGN_OR_RETURN(uint32_t v, f.GetU32(key));
  if (v > 0x7fffffffu) return Error::OutOfRange("metadata key '" + key + "' is too large");
  return static_cast<int32_t>(v);
}

Expected<int32_t> OptU32(const gguf::File& f, const std::string& key, int32_t def) {
  if (!f.Has(key)) return def;
  return ReqU32(f, key);
}

Status ReadHeadDim(const gguf::File& f, const std::string& a, int32_t def, ModelConfig* c) {
  const std::string key = Key(a, "attention.key_length");
  if (def <= 0 && !f.Has(key)) return Error::NotFound("required metadata key '" + key + "' is missing");
  REWIND_ASSIGN_OR_RETURN(c->head_dim, OptU32(f, key, def));
  REWIND_ASSIGN_OR_RETURN(int32_t value_len, OptU32(f, Key(a, "attention.value_length"), c->head_dim));
  if (value_len != c->head_dim)
    return Error::Unsupported(a + ".attention.value_length (" + std::to_string(value_len) + ") != key_length (" +
                              std::to_string(c->head_dim) + ")");
  return Status::Ok();
}

Status ReadTrunkBasics(const gguf::File& f, ModelConfig* out) {
  ModelConfig& c = *out;
  const std::string& a = c.arch_name;
  REWIND_ASSIGN_OR_RETURN(c.n_ctx_train, ReqU32(f, Key(a, "context_length")));
  REWIND_ASSIGN_OR_RETURN(c.n_embd, ReqU32(f, Key(a, "embedding_length")));
  REWIND_ASSIGN_OR_RETURN(c.n_layer_all, ReqU32(f, Key(a, "block_count")));
  c.n_layer = c.n_layer_all;
  if (!f.Has(Key(a, "attention.layer_norm_rms_epsilon")))
    return Error::NotFound("required metadata key '" + Key(a, "attention.layer_norm_rms_epsilon") +
                           "' is missing");
  REWIND_ASSIGN_OR_RETURN(c.eps, f.GetF32(Key(a, "attention.layer_norm_rms_epsilon")));
  return Status::Ok();
}

Status RequireSigmoidRouter(const gguf::File& f, const std::string& a) {
  REWIND_ASSIGN_OR_RETURN(int32_t gating, ReqU32(f, Key(a, "expert_gating_func")));
  if (gating != 2)
    return Error::Unsupported(a + ".expert_gating_func " + std::to_string(gating) +
                              ": only sigmoid routing (2) is supported");
  REWIND_ASSIGN_OR_RETURN(int32_t groups, OptU32(f, Key(a, "expert_group_count"), 0));
  if (groups > 1) return Error::Unsupported(a + ": expert groups (expert_group_count > 1) are not supported");
  return Status::Ok();
}

Expected<float> OptF32(const gguf::File& f, const std::string& key, float def) {
  if (!f.Has(key)) return def;
  return f.GetF32(key);
}

// A per-layer count: a UINT32 for every layer or an INT32/UINT32 array of block_count values; absent: all 0.
Expected<std::vector<int32_t>> PerLayer(const gguf::File& f, const std::string& key, int32_t n_layer_all) {
  const gguf::Value* v = f.Find(key);
  if (v == nullptr) return std::vector<int32_t>(n_layer_all, 0);
  if (v->type != gguf::ValueType::kArray) {
    REWIND_ASSIGN_OR_RETURN(int32_t x, ReqU32(f, key));
    return std::vector<int32_t>(n_layer_all, x);
  }
  if (v->elem_type != gguf::ValueType::kInt32 && v->elem_type != gguf::ValueType::kUint32)
    return Error::InvalidArgument("metadata key '" + key + "': array elements must be INT32 or UINT32");
  REWIND_ASSIGN_OR_RETURN(std::vector<int64_t> arr, f.GetIntArray(key));
  if (static_cast<int32_t>(arr.size()) != n_layer_all)
    return Error::InvalidArgument("metadata key '" + key + "': array length " + std::to_string(arr.size()) +
                                  " != block_count " + std::to_string(n_layer_all));
  std::vector<int32_t> out;
  for (int64_t x : arr) {
    if (x < 0 || x > 0x7fffffff) return Error::OutOfRange("metadata key '" + key + "': value out of range");
    out.push_back(static_cast<int32_t>(x));
  }
  return out;
}

// "u32|arr": a UINT32 broadcast to all layers, or an INT32/UINT32 array of length block_count. Qwen models use one
// value for every layer that has the feature; per-layer differences are not supported (an error says so).
Expected<int32_t> OptU32OrArr(const gguf::File& f, const std::string& key, int32_t def, int32_t n_layer_all) {
  if (!f.Has(key)) return def;
  REWIND_ASSIGN_OR_RETURN(std::vector<int32_t> arr, PerLayer(f, key, n_layer_all));
  int32_t value = 0;
  for (int32_t x : arr) {
    if (x == 0) continue;
    if (value != 0 && x != value)
      return Error::Unsupported("metadata key '" + key + "': per-layer values that differ are not supported");
    value = x;
  }
  return value;
}

}  // namespace internal

using internal::Key;
using internal::OptF32;
using internal::OptU32;
using internal::OptU32OrArr;
using internal::ReqU32;

const char* ArchName(Arch a) {
  switch (a) {
    case Arch::kQwen35: return "qwen35";
    case Arch::kQwen35Moe: return "qwen35moe";
    case Arch::kQwen3Next: return "qwen3next";
    case Arch::kNemotronH: return "nemotron_h";
    case Arch::kNemotronHMoe: return "nemotron_h_moe";
    case Arch::kGraniteHybrid: return "granitehybrid";
    case Arch::kLfm2: return "lfm2";
    case Arch::kLfm2Moe: return "lfm2moe";
    case Arch::kKimiLinear: return "kimi-linear";
  }
  return "?";
}

std::string SupportedArchs() {
  return "qwen35, qwen35moe, qwen3next, nemotron_h, nemotron_h_moe, granitehybrid, lfm2, lfm2moe, kimi-linear";
}

int32_t ModelConfig::n_recurrent_layers() const {
  int32_t n = 0;
  for (LayerKind k : kinds) n += IsRecurrent(k);
  return n;
}
int32_t ModelConfig::n_attn_layers() const {
  int32_t n = 0;
  for (LayerKind k : kinds) n += k == LayerKind::kAttention;
  return n;
}

uint64_t ModelConfig::KvBytesPerToken(kernels::KvTypes types) const {
  const int64_t row = static_cast<int64_t>(n_head_kv) * head_dim;
  return static_cast<uint64_t>(n_attn_layers()) * (kernels::KvRowBytes(types.k, row) + kernels::KvRowBytes(types.v, row));
}
uint64_t ModelConfig::StateBytesPerSeq() const {
  const uint64_t per_layer = static_cast<uint64_t>(ssm_conv_kernel - 1) * ssm_conv_dim() +
                             static_cast<uint64_t>(ssm_head_dim()) * ssm_state * ssm_heads;
  return 4 * per_layer * n_recurrent_layers();
}
uint64_t ModelConfig::ReplayBytesPerToken() const {
  return 4ull * n_recurrent_layers() * replay_row_floats();
}

Expected<ModelConfig> ModelConfig::FromGguf(const gguf::File& f) {
  ModelConfig c;
  if (!f.Has("general.architecture")) return Error::NotFound("required metadata key 'general.architecture' is missing");
  REWIND_ASSIGN_OR_RETURN(c.arch_name, f.GetString("general.architecture"));
  if (c.arch_name == "qwen35") {
    c.arch = Arch::kQwen35;
  } else if (c.arch_name == "qwen35moe") {
    c.arch = Arch::kQwen35Moe;
  } else if (c.arch_name == "qwen3next") {
    c.arch = Arch::kQwen3Next;
  } else if (c.arch_name == "nemotron_h") {
    c.arch = Arch::kNemotronH;
  } else if (c.arch_name == "nemotron_h_moe") {
    c.arch = Arch::kNemotronHMoe;
  } else if (c.arch_name == "granitehybrid") {
    c.arch = Arch::kGraniteHybrid;
  } else if (c.arch_name == "lfm2") {
    c.arch = Arch::kLfm2;
  } else if (c.arch_name == "lfm2moe") {
    c.arch = Arch::kLfm2Moe;
  } else if (c.arch_name == "kimi-linear") {
    c.arch = Arch::kKimiLinear;
  } else {
    return Error::Unsupported("architecture '" + c.arch_name + "' is not supported (supported: " +
                              SupportedArchs() + ")");
  }
  const std::string& a = c.arch_name;
  if (f.Has("general.name")) {
    auto n = f.GetString("general.name");
    if (n.ok()) c.name = *n;
  }
  if (c.is_mamba2() || c.is_lfm2() || c.is_kimi()) {  // per-layer kinds from per-layer head / FFN counts
    REWIND_RETURN_IF_ERROR(c.is_kimi()   ? internal::ReadKimiLinear(f, &c)
                           : c.is_lfm2() ? internal::ReadLfm2(f, &c)
                                         : internal::ReadMamba2Hybrid(f, &c));
    REWIND_RETURN_IF_ERROR(c.Validate());
    return c;
  }
  REWIND_ASSIGN_OR_RETURN(c.n_ctx_train, ReqU32(f, Key(a, "context_length")));
  REWIND_ASSIGN_OR_RETURN(c.n_embd, ReqU32(f, Key(a, "embedding_length")));
  REWIND_ASSIGN_OR_RETURN(c.n_layer_all, ReqU32(f, Key(a, "block_count")));
  REWIND_ASSIGN_OR_RETURN(c.n_nextn, OptU32(f, Key(a, "nextn_predict_layers"), 0));
  if (c.n_nextn > c.n_layer_all) return Error::InvalidArgument(a + ".nextn_predict_layers exceeds block_count");
  c.n_layer = c.n_layer_all - c.n_nextn;
  if (!f.Has(Key(a, "attention.layer_norm_rms_epsilon")))
    return Error::NotFound("required metadata key '" + Key(a, "attention.layer_norm_rms_epsilon") + "' is missing");
  REWIND_ASSIGN_OR_RETURN(c.eps, f.GetF32(Key(a, "attention.layer_norm_rms_epsilon")));

  if (!f.Has(Key(a, "attention.head_count")))
    return Error::NotFound("required metadata key '" + Key(a, "attention.head_count") + "' is missing");
  REWIND_ASSIGN_OR_RETURN(c.n_head, OptU32OrArr(f, Key(a, "attention.head_count"), 0, c.n_layer_all));
  REWIND_ASSIGN_OR_RETURN(c.n_head_kv, OptU32OrArr(f, Key(a, "attention.head_count_kv"), c.n_head, c.n_layer_all));
  REWIND_RETURN_IF_ERROR(internal::ReadHeadDim(f, a, 0, &c));
  REWIND_ASSIGN_OR_RETURN(c.n_rot, OptU32(f, Key(a, "rope.dimension_count"), c.head_dim));
  REWIND_ASSIGN_OR_RETURN(c.rope_freq_base, OptF32(f, Key(a, "rope.freq_base"), 10000.0f));
  std::string scaling = "linear";
  if (f.Has(Key(a, "rope.scaling.type"))) {
    REWIND_ASSIGN_OR_RETURN(scaling, f.GetString(Key(a, "rope.scaling.type")));
  }
  float factor = 0.0f;
  if (f.Has(Key(a, "rope.scaling.factor"))) {
    REWIND_ASSIGN_OR_RETURN(factor, f.GetF32(Key(a, "rope.scaling.factor")));
  } else if (f.Has(Key(a, "rope.scale_linear"))) {
    REWIND_ASSIGN_OR_RETURN(factor, f.GetF32(Key(a, "rope.scale_linear")));
  }
  if (scaling == "none") factor = 0.0f;
  c.rope_freq_scale = factor == 0.0f ? 1.0f : 1.0f / factor;
  if (scaling == "yarn") {
    c.rope_yarn = true;
  } else if (scaling != "none" && scaling != "linear") {
    return Error::Unsupported(a + ".rope.scaling.type '" + scaling + "' is not supported (none, linear, yarn)");
  }
  REWIND_ASSIGN_OR_RETURN(c.rope_attn_factor, OptF32(f, Key(a, "rope.scaling.attn_factor"), 1.0f));
  REWIND_ASSIGN_OR_RETURN(c.rope_n_ctx_orig, OptU32(f, Key(a, "rope.scaling.original_context_length"), c.n_ctx_train));
  if (c.arch != Arch::kQwen3Next) {
    c.imrope = true;
    const std::string k = Key(a, "rope.dimension_sections");
    if (!f.Has(k)) return Error::NotFound("required metadata key '" + k + "' is missing");
    REWIND_ASSIGN_OR_RETURN(std::vector<int64_t> s, f.GetIntArray(k));
    if (s.size() != 4) return Error::InvalidArgument("metadata key '" + k + "' must have exactly 4 elements");
    for (int i = 0; i < 4; ++i) {
      if (s[i] < 0 || s[i] > 4096) return Error::OutOfRange("metadata key '" + k + "': value out of range");
      c.rope_sections[i] = static_cast<int32_t>(s[i]);
    }
  }

  REWIND_ASSIGN_OR_RETURN(c.ssm_conv_kernel, ReqU32(f, Key(a, "ssm.conv_kernel")));
  REWIND_ASSIGN_OR_RETURN(c.ssm_inner, ReqU32(f, Key(a, "ssm.inner_size")));
  REWIND_ASSIGN_OR_RETURN(c.ssm_state, ReqU32(f, Key(a, "ssm.state_size")));
  REWIND_ASSIGN_OR_RETURN(c.ssm_heads, ReqU32(f, Key(a, "ssm.time_step_rank")));
  REWIND_ASSIGN_OR_RETURN(c.ssm_group, ReqU32(f, Key(a, "ssm.group_count")));

  REWIND_ASSIGN_OR_RETURN(c.n_ff, OptU32OrArr(f, Key(a, "feed_forward_length"), 0, c.n_layer_all));
  REWIND_ASSIGN_OR_RETURN(c.n_expert, OptU32(f, Key(a, "expert_count"), 0));
  REWIND_ASSIGN_OR_RETURN(c.n_expert_used, OptU32OrArr(f, Key(a, "expert_used_count"), 0, c.n_layer_all));
  if (c.is_moe()) {
    const int32_t def_f = c.n_expert_used > 0 ? c.n_ff / c.n_expert_used : 0;
    REWIND_ASSIGN_OR_RETURN(c.n_ff_exp, OptU32OrArr(f, Key(a, "expert_feed_forward_length"), def_f, c.n_layer_all));
    REWIND_ASSIGN_OR_RETURN(c.n_ff_shexp, OptU32(f, Key(a, "expert_shared_feed_forward_length"), c.n_ff));
  }

  // Layer kinds (spec section 4).
  c.kinds.assign(c.n_layer, LayerKind::kAttention);
  const std::string rl = Key(a, "attention.recurrent_layers");
  if (const gguf::Value* v = f.Find(rl)) {
    const bool ok_type = v->type == gguf::ValueType::kArray &&
                         (v->elem_type == gguf::ValueType::kBool || v->elem_type == gguf::ValueType::kInt32 ||
                          v->elem_type == gguf::ValueType::kUint32);
    if (!ok_type) return Error::InvalidArgument("metadata key '" + rl + "' must be an array of BOOL, INT32 or UINT32");
    if (static_cast<int32_t>(v->array.size()) != c.n_layer_all)
      return Error::InvalidArgument("metadata key '" + rl + "': length " + std::to_string(v->array.size()) +
                                    " != block_count " + std::to_string(c.n_layer_all));
    for (int32_t i = 0; i < c.n_layer; ++i) {
      const gguf::Value& e = v->array[i];
      const bool gdn = e.type == gguf::ValueType::kInt32 ? e.i != 0 : e.u != 0;
      c.kinds[i] = gdn ? LayerKind::kGdn : LayerKind::kAttention;
    }
  } else {
    REWIND_ASSIGN_OR_RETURN(int32_t interval, OptU32(f, Key(a, "full_attention_interval"), 4));
    if (interval <= 0) return Error::InvalidArgument(a + ".full_attention_interval must be > 0");
    for (int32_t i = 0; i < c.n_layer; ++i)
      c.kinds[i] = (i + 1) % interval != 0 ? LayerKind::kGdn : LayerKind::kAttention;
  }
  c.kind_index.resize(c.n_layer);
  int32_t ng = 0, na = 0;
  for (int32_t i = 0; i < c.n_layer; ++i) c.kind_index[i] = c.kinds[i] == LayerKind::kGdn ? ng++ : na++;

  const gguf::TensorInfo* emb = f.FindTensor("token_embd.weight");
  if (emb == nullptr) return Error::NotFound("tensor 'token_embd.weight' is missing");
  c.n_vocab = static_cast<int32_t>(emb->ne[1]);
  REWIND_RETURN_IF_ERROR(c.Validate());
  return c;
}

Status ModelConfig::Validate() const {
  auto bad = [&](const std::string& m) { return Status(Error::InvalidArgument(arch_name + ": " + m)); };
  if (n_embd <= 0) return bad("embedding_length must be > 0");
  if (n_layer <= 0) return bad("no trunk layers (block_count - nextn_predict_layers <= 0)");
  if (n_vocab <= 0) return bad("empty vocabulary");
  if (!(eps > 0.0f)) return bad("layer_norm_rms_epsilon must be > 0");
  if (n_attn_layers() > 0) {
    if (n_head <= 0 || n_head_kv <= 0) return bad("attention head counts must be > 0");
    if (n_head % n_head_kv != 0) return bad("head_count must be a multiple of head_count_kv");
    if (head_dim <= 0 || head_dim > 1024) return bad("attention.key_length must be in 1..1024");
    if (n_rot <= 0 || n_rot > head_dim || n_rot % 2 != 0) return bad("rope.dimension_count must be even, 1..key_length");
  }
  if (is_kimi()) return internal::ValidateKimi(*this);
  if (is_lfm2()) {
    for (LayerKind k : kinds)
      if (k != LayerKind::kShortConv && k != LayerKind::kAttention) return bad("LFM2 layers are short-conv or attention");
    if (n_recurrent_layers() > 0 && (ssm_conv_kernel < 2 || ssm_conv_kernel > 64))
      return bad("shortconv.l_cache must be in 2..64");
    if (n_attn_layers() > 0 && n_head * head_dim != n_embd) return bad("head_count * head size must be embedding_length");
    if (n_ff <= 0 && n_layer_dense_lead > 0) return bad("feed_forward_length must be > 0");
    if (arch == Arch::kLfm2Moe && n_layer_dense_lead < n_layer) {
      if (n_expert <= 0) return bad("expert_count must be > 0");
      if (n_expert_used <= 0 || n_expert_used > n_expert) return bad("expert_used_count must be in 1..expert_count");
      if (n_ff_exp <= 0) return bad("expert_feed_forward_length must be > 0");
    }
    return Status::Ok();
  }
  if (n_recurrent_layers() > 0) {
    if (ssm_conv_kernel < 1 || ssm_conv_kernel > 64) return bad("ssm.conv_kernel must be in 1..64");
    if (ssm_state <= 0 || ssm_group <= 0 || ssm_heads <= 0) return bad("ssm sizes must be > 0");
    if (ssm_heads % ssm_group != 0) return bad("ssm.time_step_rank must be a multiple of ssm.group_count");
    if (!is_mamba2() && ssm_inner != ssm_heads * ssm_state)
      return bad("ssm.inner_size must equal time_step_rank * state_size");
    if (is_mamba2() && (ssm_inner <= 0 || ssm_inner % ssm_heads != 0 || ssm_inner % ssm_group != 0))
      return bad("ssm.inner_size must be a positive multiple of time_step_rank and group_count");
  }
  if (is_mamba2()) {
    for (LayerKind k : kinds)
      if (k == LayerKind::kGdn) return bad("Gated DeltaNet layers in a Mamba-2 hybrid");
    const bool mlp = arch == Arch::kGraniteHybrid || n_layer > n_recurrent_layers() + n_attn_layers();
    if (n_ff <= 0 && mlp && arch != Arch::kNemotronHMoe) return bad("feed_forward_length must be > 0");
    if (arch == Arch::kNemotronHMoe && mlp) {
      if (n_expert <= 0) return bad("expert_count must be > 0");
      if (n_expert_used <= 0 || n_expert_used > n_expert) return bad("expert_used_count must be in 1..expert_count");
      if (n_ff_exp <= 0 || n_ff_shexp <= 0) return bad("expert and shared-expert feed-forward lengths must be > 0");
    }
    if (is_granite_moe() && (n_expert_used <= 0 || n_expert_used > n_expert))
      return bad("expert_used_count must be in 1..expert_count");
    if (arch == Arch::kGraniteHybrid && ssm_inner != 2 * n_embd)
      return bad("ssm.inner_size must be 2 * embedding_length (llama.cpp supports only this expansion)");
    return Status::Ok();
  }
  if (arch == Arch::kQwen35 && n_ff <= 0) return bad("feed_forward_length must be > 0");
  if (is_moe()) {
    if (n_expert <= 0) return bad("expert_count must be > 0");
    if (n_expert_used <= 0 || n_expert_used > n_expert) return bad("expert_used_count must be in 1..expert_count");
    if (n_ff_exp <= 0) return bad("expert_feed_forward_length must be > 0");
  }
  return Status::Ok();
}

}  // namespace rw::model
