// Preset table. Shapes of the published models: docs/make-model.md (with the sources and what is a best
// guess).
#include "modelgen/config.h"

namespace rw::modelgen {
namespace {

// The start of a layer-pattern preset (nemotron_h, granitehybrid, lfm2, kimi-linear): names, the pattern (one
// character per trunk layer), no MTP block, the width and the attention heads.
ModelConfig Patterned(const char* preset, const char* arch, const char* pattern, int64_t embd, int64_t heads,
                      int64_t kv_heads) {
  ModelConfig c;
  c.preset = c.name = preset;
  c.arch = arch;
  c.layer_pattern = pattern;
  c.n_layer = static_cast<int64_t>(c.layer_pattern.size());
  c.n_nextn = 0;
  c.n_embd = embd;
  c.n_head = heads;
  c.n_head_kv = kv_heads;
  return c;
}

// The recurrent mixer's sizes: conv window, state, groups (key heads) and heads (value heads, dt rank).
void SetSsm(ModelConfig* c, int64_t conv, int64_t state, int64_t groups, int64_t heads) {
  c->ssm_conv = conv;
  c->ssm_state = state;
  c->ssm_groups = groups;
  c->ssm_dt_rank = heads;
}

// The MoE sizes: `experts` top `used` of width ff_exp, a shared expert of ff_shexp (0: none or, kimi-linear,
// n_expert_shared of ff_exp).
void SetExperts(ModelConfig* c, int64_t experts, int64_t used, int64_t ff_exp, int64_t ff_shexp) {
  c->n_expert = experts;
  c->n_expert_used = used;
  c->n_ff_exp = ff_exp;
  c->n_ff_shexp = ff_shexp;
}

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
  SetSsm(&c, 4, 128, gdn_k_heads, gdn_v_heads);
  c.n_ff = ff;
  c.tied = tied;
  c.eps = 1e-6f;
  c.n_ctx_train = 262144;
  return c;
}

// Exactly the tiny-qwen35 fixture (../shared/fixtures/llama-ref/README.md section 2.2).
ModelConfig Tiny() {
  ModelConfig c = Qwen35("tiny", 8, 256, 4, 2, 2, 4, 256, true);
  c.name = "tiny-qwen35";
  c.head_dim = 64;
  c.n_rot = 16;
  c.rope_sections = {3, 3, 2, 0};
  c.ssm_state = 64;
  c.n_ctx_train = 8192;
  c.default_seed = 3501;
  return c;
}

// Qwen3.5-MoE / Qwen3-Next family (qwen35moe / qwen3next): E 2048, attention 16 q / 2 kv heads of 256 with 64
// rotary dims, GDN 16 key / 32 value heads of 128, expert and shared-expert width 512 (docs/make-model.md).
ModelConfig Moe(const char* preset, const char* arch, int64_t layers, int64_t experts, int64_t used) {
  ModelConfig c = Qwen35(preset, layers, 2048, 16, 2, 16, 32, 5120, false);
  c.arch = arch;
  if (c.arch == "qwen3next") c.rope_sections = {0, 0, 0, 0};
  SetExperts(&c, experts, used, 512, 512);
  return c;
}

// Exactly the tiny-qwen35moe / tiny-qwen3next fixtures (README section 2.2): E 128, heads of 32 with 8 rotary
// dims, GDN heads of 32, 8 experts top-2 of width 32, shared expert 64.
ModelConfig TinyMoe(const char* preset, const char* arch) {
  ModelConfig c = Tiny();
  c.preset = preset;
  c.arch = arch;
  c.name = std::string("tiny-") + arch;
  c.n_embd = 128;
  c.head_dim = 32;
  c.n_rot = 8;
  c.ssm_state = 32;
  SetExperts(&c, 8, 2, 32, 64);
  if (c.arch == "qwen35moe") {
    c.rope_sections = {2, 1, 1, 0};
    c.tied = false;
    c.write_recurrent_layers = false;
    c.default_seed = 3502;
  } else {
    c.rope_sections = {0, 0, 0, 0};
    c.tied = true;
    c.default_seed = 3503;
  }
  return c;
}

// Nemotron-H family (nemotron_h): Mamba-2 (conv 4, heads of 64 (9B: 80), 8 groups, state 128), attention without
// RoPE, ReLU² MLPs, untied, eps 1e-5; layer patterns from the published configs (docs/make-model.md).
ModelConfig NemotronH(const char* preset, const char* pattern, int64_t embd, int64_t heads, int64_t kv_heads,
                      int64_t head_dim, int64_t m_heads, int64_t m_head_dim, int64_t ff) {
  ModelConfig c = Patterned(preset, "nemotron_h", pattern, embd, heads, kv_heads);
  c.head_dim = head_dim;
  c.n_rot = head_dim;
  SetSsm(&c, 4, 128, 8, m_heads);
  c.mamba_head_dim = m_head_dim;
  c.n_ff = ff;
  c.tied = false;
  c.eps = 1e-5f;
  c.n_ctx_train = 8192;
  return c;
}

// The tiny-nemotron-h test fixture (tests/data/golden-mamba/README.md): E 128, 8 layers M-M*-M*-, Mamba-2 8 heads
// of 32, 2 groups, state 32; attention 4 q / 2 kv heads of 32; MLP 256; tied.
ModelConfig TinyNemotronH() {
  ModelConfig c = NemotronH("tiny-nemotron-h", "M-M*-M*-", 128, 4, 2, 32, 8, 32, 256);
  c.name = "tiny-nemotron-h";
  c.ssm_state = 32;
  c.ssm_groups = 2;
  c.tied = true;
  c.default_seed = 2101;
  return c;
}

// Granite 4.0-H family (granitehybrid): Mamba-2 with d_inner = 2E, 1 group, state 128; attention without RoPE;
// a SwiGLU FFN in every block; Granite's multipliers; tied; eps 1e-5.
ModelConfig GraniteHybrid(const char* preset, const char* pattern, int64_t embd, int64_t heads, int64_t kv_heads,
                          int64_t m_heads, int64_t ff) {
  ModelConfig c = NemotronH(preset, pattern, embd, heads, kv_heads, embd / heads, m_heads, 2 * embd / m_heads, ff);
  c.arch = "granitehybrid";
  c.rope_base = 10000.0f;
  c.ssm_groups = 1;
  c.tied = true;
  c.embedding_scale = 12.0f;
  c.residual_scale = 0.246f;
  c.attention_scale = 0.0078125f;
  c.logit_scale = 8.0f;
  return c;
}

// The tiny-granite-h test fixture: E 128, 8 layers MMM*MM*M, Mamba-2 8 heads of 32 (d_inner 2E), 2 groups,
// state 16; attention 4 q / 2 kv heads of 32 with RoPE (rope.scaling.finetuned = true, adjacent pairs); FFN 128;
// multipliers chosen to keep the tiny model's logits spread (logit_scale 0.5 doubles them).
ModelConfig TinyGraniteH() {
  ModelConfig c = GraniteHybrid("tiny-granite-h", "MMM*MM*M", 128, 4, 2, 8, 128);
  c.name = "tiny-granite-h";
  c.ssm_state = 16;
  c.ssm_groups = 2;
  c.granite_rope = true;
  c.embedding_scale = 4.0f;
  c.residual_scale = 0.5f;
  c.attention_scale = 0.03125f;
  c.logit_scale = 0.5f;
  c.default_seed = 2201;
  return c;
}

// Granite 4.0-H MoE (granitehybrid with experts): a softmax-routed MoE of SwiGLU experts (feed_forward_length =
// expert width) and an ungated SwiGLU shared expert in every block.
ModelConfig GraniteHybridMoe(ModelConfig c, int64_t experts, int64_t used, int64_t ff_shexp) {
  SetExperts(&c, experts, used, c.n_ff, ff_shexp);
  return c;
}

// The tiny-granite-h-moe test fixture: tiny-granite-h's mixers on 6 layers MM*M*M, 8 experts top-2 of width 16,
// shared expert 64.
ModelConfig TinyGraniteHMoe() {
  ModelConfig c = TinyGraniteH();
  c.preset = c.name = "tiny-granite-h-moe";
  c.layer_pattern = "MM*M*M";
  c.n_layer = static_cast<int64_t>(c.layer_pattern.size());
  c.n_ff = 16;
  c.default_seed = 2401;
  return GraniteHybridMoe(c, 8, 2, 64);
}

// Granite-4.0-H-Tiny (best guess from the published config): E 1536, 40 layers with attention at 5, 15, 25, 35,
// 12 q / 4 kv heads of 128, Mamba-2 48 heads of 64, 64 experts top-6 of width 512, shared expert 1024.
ModelConfig GraniteHTiny() {
  ModelConfig c = GraniteHybrid("granite-4.0-h-tiny", "MMMMM*MMMMMMMMM*MMMMMMMMM*MMMMMMMMM*MMMM", 1536, 12, 4, 48, 512);
  c.residual_scale = 0.22f;
  c.logit_scale = 6.0f;
  return GraniteHybridMoe(c, 64, 6, 1024);
}

// LFM2 (lfm2): short-conv layers (l_cache 3) and attention layers with q/k norms and NeoX RoPE (base 1e6), a
// SwiGLU FFN in every block, tied, eps 1e-5 (docs/make-model.md).
ModelConfig Lfm2(const char* preset, const char* pattern, int64_t embd, int64_t heads, int64_t kv_heads, int64_t ff) {
  ModelConfig c = Patterned(preset, "lfm2", pattern, embd, heads, kv_heads);
  c.head_dim = c.n_rot = embd / heads;
  c.rope_base = 1e6f;
  SetSsm(&c, 3, 0, 0, 0);  // ssm_conv: shortconv.l_cache
  c.n_ff = ff;
  c.tied = true;
  c.eps = 1e-5f;
  c.n_ctx_train = 128000;
  return c;
}

// LFM2-MoE (lfm2moe): `dense_lead` blocks with the dense FFN, then sigmoid-routed MoE blocks of SwiGLU experts.
ModelConfig Lfm2Moe(ModelConfig c, int64_t dense_lead, int64_t experts, int64_t used, int64_t ff_exp) {
  c.arch = "lfm2moe";
  c.n_dense_lead = dense_lead;
  SetExperts(&c, experts, used, ff_exp, 0);
  return c;
}

// kimi-linear: KDA (K) and MLA (*) layers of `heads` heads; KDA heads of kda_dim, conv 4; MLA latent `rank`, rope
// dims `rope`, q/k heads of nope + rope, v heads of v_dim; `dense` leading dense blocks of ff, then `experts` top
// `used` of width ff_exp plus one shared expert; untied output, eps 1e-5, routed weights x2.446.
ModelConfig KimiLinear(const char* preset, const char* pattern, int64_t embd, int64_t heads, int64_t kda_dim,
                       int64_t rank, int64_t nope, int64_t rope, int64_t v_dim, int64_t ff, int64_t experts,
                       int64_t used, int64_t ff_exp) {
  ModelConfig c = Patterned(preset, "kimi-linear", pattern, embd, heads, 1);
  c.kv_lora_rank = rank;
  c.n_rot = rope;
  c.head_dim = rank + rope;
  c.mla_k = nope + rope;
  c.mla_v = v_dim;
  SetSsm(&c, 4, kda_dim, heads, heads);
  c.n_dense_lead = 1;
  SetExperts(&c, experts, used, ff_exp, 0);
  c.n_expert_shared = 1;
  c.expert_weights_scale = 2.446f;
  c.n_ff = ff;
  c.tied = false;
  c.eps = 1e-5f;
  c.n_ctx_train = 1048576;
  return c;
}

// Nemotron 3 Nano family (nemotron_h_moe): MoE layers (E) with a sigmoid router and selection bias, ReLU² experts
// and shared expert; renormalised top-k weights scaled by 2.5.
ModelConfig NemotronHMoe(const char* preset, const char* pattern, int64_t embd, int64_t heads, int64_t kv_heads,
                         int64_t head_dim, int64_t m_heads, int64_t m_head_dim, int64_t experts, int64_t used,
                         int64_t ff_exp, int64_t ff_shexp) {
  ModelConfig c = NemotronH(preset, pattern, embd, heads, kv_heads, head_dim, m_heads, m_head_dim, ff_exp);
  c.arch = "nemotron_h_moe";
  SetExperts(&c, experts, used, ff_exp, ff_shexp);
  c.expert_weights_scale = 2.5f;
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
  p.push_back({"tiny-moe",
               "the tiny-qwen35moe test fixture shape (qwen35moe, E 128, 8 experts top-2, untied)",
               TinyMoe("tiny-moe", "qwen35moe")});
  p.push_back({"tiny-next", "the tiny-qwen3next test fixture shape (qwen3next, E 128, 8 experts top-2, tied)",
               TinyMoe("tiny-next", "qwen3next")});
  p.push_back({"qwen3.6-35b-a3b", "Qwen3.6-35B-A3B shape (qwen35moe, E 2048, 40 layers, 256 experts top-8)",
               Moe("qwen3.6-35b-a3b", "qwen35moe", 40, 256, 8)});
  p.push_back({"qwen3-next-80b-a3b",
               "Qwen3-Next-80B-A3B shape (qwen3next, E 2048, 48 layers, 512 experts top-10)",
               Moe("qwen3-next-80b-a3b", "qwen3next", 48, 512, 10)});
  p.push_back({"tiny-nemotron-h",
               "the tiny-nemotron-h test fixture shape (nemotron_h: Mamba-2 + attention + ReLU² MLP, E 128, 8 layers)",
               TinyNemotronH()});
  p.push_back({"nemotron-h-8b", "Nemotron-H-8B shape (nemotron_h, E 4096, 52 layers: 24 Mamba-2, 4 attention, 24 MLP)",
               NemotronH("nemotron-h-8b", "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-", 4096, 32, 8,
                         128, 128, 64, 21504)});
  p.push_back({"nemotron-nano-9b-v2",
               "NVIDIA-Nemotron-Nano-9B-v2 shape (nemotron_h, E 4480, 56 layers: 27 Mamba-2, 4 attention, 25 MLP)",
               NemotronH("nemotron-nano-9b-v2", "M-M-M-MM-M-M-M*-M-M-M*-M-M-M-M*-M-M-M-M*-M-MM-M-M-M-M-M-", 4480,
                         40, 8, 128, 128, 80, 15680)});
  {
    ModelConfig moe = NemotronHMoe("tiny-nemotron-h-moe", "MEM*EM*E", 128, 4, 2, 32, 8, 32, 8, 2, 64, 128);
    moe.ssm_state = 32;
    moe.ssm_groups = 2;
    moe.tied = true;
    moe.default_seed = 2301;
    p.push_back({"tiny-nemotron-h-moe",
                 "the tiny-nemotron-h-moe test fixture shape (nemotron_h_moe, E 128, 8 layers, 8 experts top-2)", moe});
  }
  p.push_back({"nemotron-3-nano-30b-a3b",
               "Nemotron 3 Nano 30B-A3B shape (nemotron_h_moe, E 2688, 52 layers: 23 Mamba-2, 6 attention, 23 MoE "
               "with 128 experts top-6)",
               NemotronHMoe("nemotron-3-nano-30b-a3b", "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME", 2688,
                            32, 2, 128, 64, 64, 128, 6, 1856, 3712)});
  p.push_back({"tiny-granite-h",
               "the tiny-granite-h test fixture shape (granitehybrid: Mamba-2 + attention with RoPE, E 128, 8 layers)",
               TinyGraniteH()});
  p.push_back({"granite-4.0-h-micro",
               "Granite-4.0-H-Micro shape (granitehybrid, E 2048, 40 layers: 36 Mamba-2, 4 attention, dense FFN)",
               GraniteHybrid("granite-4.0-h-micro", "MMMMMMMMM*MMMMMMMMM*MMMMMMMMM*MMMMMMMMM*", 2048, 16, 4, 64, 8192)});
  p.push_back({"tiny-granite-h-moe",
               "the tiny-granite-h-moe test fixture shape (granitehybrid MoE: 8 experts top-2 + shared expert, E 128, "
               "6 layers)",
               TinyGraniteHMoe()});
  p.push_back({"granite-4.0-h-tiny",
               "Granite-4.0-H-Tiny shape (granitehybrid MoE, E 1536, 40 layers: 36 Mamba-2, 4 attention, 64 experts "
               "top-6 + shared expert)",
               GraniteHTiny()});
  {
    ModelConfig lfm = Lfm2("tiny-lfm2", "CC*C*C", 128, 4, 2, 256);
    lfm.default_seed = 2501;
    lfm.n_ctx_train = 8192;
    p.push_back({"tiny-lfm2", "the tiny-lfm2 test fixture shape (lfm2: short conv + attention, E 128, 6 layers)", lfm});
  }
  {
    ModelConfig moe = Lfm2Moe(Lfm2("tiny-lfm2-moe", "CC*C*C", 128, 4, 2, 256), 2, 8, 2, 16);
    moe.default_seed = 2601;
    moe.n_ctx_train = 8192;
    p.push_back({"tiny-lfm2-moe",
                 "the tiny-lfm2-moe test fixture shape (lfm2moe: 2 dense blocks, then 8 experts top-2, E 128, 6 layers)",
                 moe});
  }
  p.push_back({"lfm2-8b-a1b",
               "LFM2-8B-A1B shape (lfm2moe, E 2048, 24 layers: 18 short conv, 6 attention; 32 experts top-4)",
               Lfm2Moe(Lfm2("lfm2-8b-a1b", "CC*CCC*CCC*CCC*CCC*CC*CC", 2048, 32, 8, 7168), 2, 32, 4, 1792)});
  p.push_back({"lfm2-1.2b", "LFM2-1.2B shape (lfm2, E 2048, 16 layers: 10 short conv, 6 attention)",
               Lfm2("lfm2-1.2b", "CC*CC*CC*C*C*C*C", 2048, 32, 8, 8192)});
  {
    ModelConfig kimi = KimiLinear("tiny-kimi-linear", "KK*KK*", 128, 4, 32, 48, 32, 16, 32, 256, 8, 2, 32);
    kimi.default_seed = 2701;
    kimi.n_ctx_train = 8192;
    p.push_back({"tiny-kimi-linear",
                 "the tiny-kimi-linear test fixture shape (kimi-linear: KDA + MLA, E 128, 6 layers, 1 dense block, "
                 "then 8 experts top-2 + shared expert)",
                 kimi});
  }
  p.push_back({"kimi-linear-48b-a3b",
               "Kimi-Linear-48B-A3B shape (kimi-linear, E 2304, 27 layers: 20 KDA, 7 MLA; 256 experts top-8 + "
               "shared expert)",
               KimiLinear("kimi-linear-48b-a3b", "KKK*KKK*KKK*KKK*KKK*KKK*KK*", 2304, 32, 128, 512, 128, 64, 128,
                          9216, 256, 8, 1024)});
  return p;
}

}  // namespace

uint64_t ModelConfig::StateBytesPerSeq() const {
  uint64_t n = 0;
  for (int64_t i = 0; i < n_layer; ++i) n += IsRecurrent(i);
  const uint64_t conv = static_cast<uint64_t>(ssm_conv - 1) * ssm_conv_dim();
  return n * 4 * (conv + static_cast<uint64_t>(ssm_head_dim()) * ssm_state * ssm_dt_rank);
}

uint64_t ModelConfig::ReplayBytesPerToken() const {
  uint64_t n = 0;
  for (int64_t i = 0; i < n_layer; ++i) n += IsRecurrent(i);
  if (is_kimi()) return n * 4 * (ssm_conv_dim() + ssm_dt_rank + ssm_inner());
  return n * 4 * (ssm_conv_dim() + (is_mamba2() ? 1 : 2) * ssm_dt_rank);
}

uint64_t ModelConfig::KvF16BytesPerToken() const {
  uint64_t n = 0;
  for (int64_t i = 0; i < n_layer; ++i) n += IsAttention(i);
  return n * 2 * n_head_kv * head_dim * 2;
}

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
  if (is_kimi()) {
    if (n_embd <= 0 || n_head <= 0 || ssm_state <= 0 || ssm_conv < 2 || kv_lora_rank <= 0 || mla_k <= n_rot ||
        mla_v <= 0 || n_nextn != 0 || static_cast<int64_t>(layer_pattern.size()) != n_layer ||
        layer_pattern.find_first_not_of("K*") != std::string::npos || n_dense_lead < 0 || n_dense_lead > n_layer ||
        (n_dense_lead > 0 && n_ff <= 0) || n_expert <= 0 || n_expert_used <= 0 || n_expert_used > n_expert ||
        n_ff_exp <= 0)
      return bad("kimi-linear needs K / * layers, KDA and MLA sizes, experts and no MTP block");
    return Status::Ok();
  }
  if (is_lfm2()) {
    if (n_embd <= 0 || n_head <= 0 || n_head_kv <= 0 || n_head % n_head_kv != 0 || head_dim * n_head != n_embd ||
        n_ff <= 0 || ssm_conv < 2 || n_nextn != 0 || static_cast<int64_t>(layer_pattern.size()) != n_layer ||
        layer_pattern.find_first_not_of("C*") != std::string::npos)
      return bad("lfm2 needs C / * layers, heads of E / head_count, an FFN, l_cache >= 2 and no MTP block");
    if (arch == "lfm2moe" && (n_dense_lead < 0 || n_dense_lead > n_layer || n_expert <= 0 || n_expert_used <= 0 ||
                              n_expert_used > n_expert || n_ff_exp <= 0))
      return bad("lfm2moe needs experts (count, top-k, width) and at most n_layer leading dense blocks");
    return Status::Ok();
  }
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
  if ((arch == "qwen35moe" || arch == "qwen3next") && (n_expert <= 0 || n_ff_shexp <= 0)) {
    return bad(arch + " needs experts and a shared expert");
  }
  if (arch == "granitehybrid" && (ssm_inner() != 2 * n_embd || layer_pattern.find('-') != std::string::npos))
    return bad("granitehybrid needs ssm inner size 2 * E and no MLP-only layers");
  if (is_mamba2()) {
    if (static_cast<int64_t>(layer_pattern.size()) != n_layer || n_nextn != 0 || mamba_head_dim <= 0)
      return bad("a Mamba-2 hybrid needs one pattern character per layer, a head size and no MTP block");
    for (char ch : layer_pattern)
      if (ch != 'M' && ch != '*' && ch != '-' && ch != 'E') return bad("layer pattern characters are M, *, - and E");
    if ((layer_pattern.find('E') != std::string::npos) != (arch == "nemotron_h_moe") ||
        (arch == "nemotron_h_moe" && (n_expert <= 0 || n_expert_used <= 0 || n_expert_used > n_expert ||
                                      n_ff_exp <= 0 || n_ff_shexp <= 0)))
      return bad("nemotron_h_moe needs E layers, experts and a shared expert (and only it has E layers)");
  }
  return Status::Ok();
}

}  // namespace rw::modelgen
