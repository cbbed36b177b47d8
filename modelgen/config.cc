// Preset table. Shapes of the published models: docs/make-model.md (with the sources and what is a best
// guess).
#include "modelgen/config.h"

namespace rw::modelgen {
namespace {

// Qwen3.5 family: 3 GDN layers then 1 attention layer, attention heads of 256 with 64 rotary dims and
// IMROPE sections [11, 11, 10, 0], GDN heads of 128, conv 4, one MTP block, rope base 1e7, eps 1e-6, 262144
// ctx.
ModelConfig Qwen35(const char* preset, int64_t layers, int64_t embd, int64_t heads, int64_t kv_heads,
                   int64_t gdn_k_heads, int64_t gdn_v_heads, int64_t ff, bool tied) {
  ModelConfig c;
  c.preset = preset;
  c.arch = "qwen35";
  c.name = preset;
  c.n_embd = embd;
  c.n_layer = layers;
  c.n_nextn = 1;
  c.full_attention_interval = 4;
  c.n_head = heads;
  c.n_head_kv = kv_heads;
  c.head_dim = 256;
  c.n_rot = 64;
  c.rope_sections = {11, 11, 10, 0};
  c.rope_base = 1e7f;
  c.ssm_conv = 4;
  c.ssm_state = 128;
  c.ssm_groups = gdn_k_heads;
  c.ssm_dt_rank = gdn_v_heads;
  c.n_ff = ff;
  c.tied = tied;
  c.eps = 1e-6f;
  c.n_ctx_train = 262144;
  c.default_seed = 1;
  return c;
}

// Exactly the tiny-qwen35 fixture (../shared/fixtures/llama-ref/README.md section 2.2).
ModelConfig Tiny() {
  ModelConfig c;
  c.preset = "tiny";
  c.arch = "qwen35";
  c.name = "tiny-qwen35";
  c.n_embd = 256;
  c.n_layer = 8;
  c.n_nextn = 1;
  c.full_attention_interval = 4;
  c.n_head = 4;
  c.n_head_kv = 2;
  c.head_dim = 64;
  c.n_rot = 16;
  c.rope_sections = {3, 3, 2, 0};
  c.rope_base = 1e7f;
  c.ssm_conv = 4;
  c.ssm_state = 64;
  c.ssm_groups = 2;
  c.ssm_dt_rank = 4;
  c.n_ff = 256;
  c.tied = true;
  c.eps = 1e-6f;
  c.n_ctx_train = 8192;
  c.default_seed = 3501;
  return c;
}

std::vector<Preset> MakePresets() {
  std::vector<Preset> p;
  p.push_back({"tiny", "the tiny-qwen35 test fixture shape (E 256, 8+1 layers, ~5M params + vocab)", Tiny()});
  p.push_back({"qwen3.5-0.8b", "Qwen3.5-0.8B shape (E 1024, 24 layers)",
               Qwen35("qwen3.5-0.8b", 24, 1024, 8, 2, 16, 16, 3584, true)});
  p.push_back({"qwen3.5-2b", "Qwen3.5-2B shape (E 2048, 24 layers)",
               Qwen35("qwen3.5-2b", 24, 2048, 8, 2, 16, 16, 6144, true)});
  p.push_back({"qwen3.5-4b", "Qwen3.5-4B shape (E 2560, 32 layers)",
               Qwen35("qwen3.5-4b", 32, 2560, 16, 4, 16, 32, 9216, true)});
  p.push_back({"qwen3.5-9b", "Qwen3.5-9B shape (E 4096, 32 layers, untied)",
               Qwen35("qwen3.5-9b", 32, 4096, 16, 4, 16, 32, 12288, false)});
  p.push_back({"qwen3.6-27b", "Qwen3.6-27B shape (E 5120, 64 layers, untied)",
               Qwen35("qwen3.6-27b", 64, 5120, 24, 4, 16, 48, 17408, false)});
  // MoE presets (qwen35moe / qwen3next) go here once their ArchSpec exists (tensor_plan.cc).
  return p;
}

}  // namespace

const std::vector<Preset>& Presets() {
  static const std::vector<Preset> presets = MakePresets();
  return presets;
}

Expected<ModelConfig> FindPreset(const std::string& name) {
  for (const Preset& p : Presets()) {
    if (name == p.name) return p.config;
  }
  return Error::NotFound("unknown preset '" + name + "' (known: " + PresetNames() + ")");
}

std::string PresetNames() {
  std::string s;
  for (const Preset& p : Presets()) {
    if (!s.empty()) s += ", ";
    s += p.name;
  }
  return s;
}

Status ModelConfig::Validate() const {
  auto bad = [&](const std::string& m) { return Error::InvalidArgument("preset " + preset + ": " + m); };
  if (n_vocab <= 0) return bad("vocabulary is empty");
  if (n_embd <= 0 || n_layer <= 0 || n_head <= 0 || n_head_kv <= 0 || head_dim <= 0 || ssm_state <= 0 ||
      ssm_groups <= 0 || ssm_dt_rank <= 0 || ssm_conv <= 0 || full_attention_interval <= 0) {
    return bad("a dimension is not positive");
  }
  if (n_head % n_head_kv != 0) return bad("head_count not a multiple of head_count_kv");
  if (ssm_dt_rank % ssm_groups != 0) return bad("GDN value heads not a multiple of key heads");
  if (n_rot <= 0 || n_rot > head_dim || n_rot % 2 != 0) return bad("bad rope dimension count");
  if (n_nextn < 0 || n_nextn > 1) return bad("at most one MTP block is supported");
  if (n_expert > 0 && (n_expert_used <= 0 || n_expert_used > n_expert || n_ff_exp <= 0)) {
    return bad("bad expert configuration");
  }
  return Status::Ok();
}

}  // namespace rw::modelgen
