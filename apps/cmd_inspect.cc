// rewind inspect MODEL: architecture, hyperparameters, layer kinds, tensors and memory sizes.
#include <cstdio>
#include <string>

#include "apps/command.h"
#include "base/flags.h"
#include "gguf/describe.h"
#include "kernels/kv_quant.h"
#include "model/forward.h"
#include "modelgen/config.h"

namespace rw::apps {
namespace {

// The real bytes of one token's K and V rows in all attention layers, for every KV cache type (-ctk / -ctv; the
// block types store 32-element blocks per head), as the cache budget counts them, and one sequence's KV at
// 32K, 128K and 256K tokens.
void PrintKvBytesPerToken(int64_t n_attn, int64_t n_head_kv, int64_t head_dim) {
  std::printf("  attention KV per token (K+V, all layers), by cache type (--kv-type / -ctk / -ctv):\n");
  for (kernels::KvType t : kernels::kAllKvTypes) {
    const std::string name(kernels::KvTypeName(t));
    if (!model::CheckKvTypes(t, static_cast<int32_t>(head_dim)).ok()) {
      std::printf("    %-7s not usable: head dim %lld is not a multiple of %d\n", name.c_str(), (long long)head_dim,
                  kernels::KvBlockElems(t));
      continue;
    }
    const uint64_t b = n_attn * 2 * kernels::KvRowBytes(t, n_head_kv * head_dim);
    // One sequence's KV at long depths (docs/long-context.md): bytes per token times the depth, in GiB.
    auto gib = [&](uint64_t tokens) { return static_cast<double>(b * tokens) / (1ull << 30); };
    std::printf("    %-7s %8llu bytes  (%.1f MiB per 1K tokens; 32K: %.2f GiB, 128K: %.2f GiB, 256K: %.2f GiB)\n",
                name.c_str(), static_cast<unsigned long long>(b), b * 1024 / 1048576.0, gib(32768), gib(131072),
                gib(262144));
  }
}

// Memory sizes of a make-model preset's shape, without generating weights (e.g. Qwen3.6-27B: 54 GB in F16).
int InspectPreset(const std::string& name) {
  auto p = modelgen::FindPreset(name);
  if (!p.ok()) {
    std::fprintf(stderr, "rewind inspect: %s\n", p.error().ToString().c_str());
    return 1;
  }
  const modelgen::ModelConfig& c = *p;
  int64_t n_rec = 0, n_attn = 0;
  for (int64_t i = 0; i < c.n_layer; ++i) {
    n_rec += c.IsRecurrent(i);
    n_attn += c.IsAttention(i);
  }
  const uint64_t state = c.StateBytesPerSeq(), replay = c.ReplayBytesPerToken();
  std::printf("preset:          %s (%s; shape only, no weights)\n", name.c_str(), c.arch.c_str());
  if (c.is_kimi()) {
    std::printf("layers:          %lld: %lld KDA, %lld MLA (%s); %lld dense SwiGLU blocks (width %lld), then MoE\n",
                (long long)c.n_layer, (long long)n_rec, (long long)n_attn, c.layer_pattern.c_str(),
                (long long)c.n_dense_lead, (long long)c.n_ff);
    std::printf("moe:             %lld experts, top %lld (sigmoid router), width %lld, %lld shared expert(s)\n",
                (long long)c.n_expert, (long long)c.n_expert_used, (long long)c.n_ff_exp, (long long)c.n_expert_shared);
    std::printf("kda:             conv kernel %lld  heads %lld x %lld  conv channels %lld (q|k|v)\n", (long long)c.ssm_conv,
                (long long)c.ssm_dt_rank, (long long)c.ssm_state, (long long)c.ssm_conv_dim());
    std::printf("mla:             %lld heads, latent %lld + %lld (cached row, stored as K and as V)\n", (long long)c.n_head,
                (long long)c.kv_lora_rank, (long long)c.n_rot);
  } else if (c.is_lfm2()) {
    std::printf("layers:          %lld: %lld short conv, %lld attention, each + SwiGLU FFN %lld (%s)\n",
                (long long)c.n_layer, (long long)n_rec, (long long)n_attn, (long long)c.n_ff, c.layer_pattern.c_str());
    if (c.n_expert > 0)
      std::printf("moe:             after %lld dense blocks: %lld experts, top %lld (sigmoid router), width %lld\n",
                  (long long)c.n_dense_lead, (long long)c.n_expert, (long long)c.n_expert_used,
                  (long long)c.n_ff_exp);
    std::printf("short conv:      conv kernel (l_cache) %lld  channels %lld\n", (long long)c.ssm_conv,
                (long long)c.ssm_conv_dim());
  } else if (c.is_mamba2()) {
    if (c.arch == "granitehybrid") {
      std::printf("layers:          %lld: %lld Mamba-2, %lld attention, each + SwiGLU %s (%s)\n", (long long)c.n_layer,
                  (long long)n_rec, (long long)n_attn, c.n_expert > 0 ? "MoE" : "FFN", c.layer_pattern.c_str());
      if (c.n_expert > 0)
        std::printf("moe:             %lld experts, top %lld (softmax router), expert width %lld, shared expert %lld\n",
                    (long long)c.n_expert, (long long)c.n_expert_used, (long long)c.n_ff_exp, (long long)c.n_ff_shexp);
    } else {
      std::printf("layers:          %lld: %lld Mamba-2, %lld attention, %lld %s (%s)\n", (long long)c.n_layer,
                  (long long)n_rec, (long long)n_attn, (long long)(c.n_layer - n_rec - n_attn),
                  c.n_expert > 0 ? "MoE" : "MLP", c.layer_pattern.c_str());
    }
    std::printf("mamba-2:         conv kernel %lld  heads %lld x %lld  groups %lld  state %lld  conv channels %lld\n",
                (long long)c.ssm_conv, (long long)c.ssm_dt_rank, (long long)c.ssm_head_dim(), (long long)c.ssm_groups,
                (long long)c.ssm_state, (long long)c.ssm_conv_dim());
  } else {
    std::printf("layers:          %lld trunk: %lld GDN, %lld attention (+%lld MTP)\n", (long long)c.n_layer,
                (long long)n_rec, (long long)n_attn, (long long)c.n_nextn);
    std::printf("gated deltanet:  conv kernel %lld  head size %lld  key heads %lld  value heads %lld  conv channels %lld\n",
                (long long)c.ssm_conv, (long long)c.ssm_state, (long long)c.ssm_groups, (long long)c.ssm_dt_rank,
                (long long)c.ssm_conv_dim());
  }
  std::printf("\nmemory:\n");
  PrintKvBytesPerToken(n_attn, c.n_head_kv, c.head_dim);
  std::printf("  recurrent state per sequence (F32):     %llu B = %.1f MiB (= one checkpoint)\n",
              (unsigned long long)state, state / 1048576.0);
  std::printf("  replay log per token:                   %llu B (%.2f%% of one state)\n", (unsigned long long)replay,
              100.0 * replay / state);
  return 0;
}

int Inspect(int argc, char** argv) {
  FlagSet flags("inspect", "print a model's architecture, hyperparameters, layers, tensors and memory sizes");
  std::string path, preset;
  bool tensors = true;
  flags.Positional("MODEL", &path, "GGUF model file", false);
  flags.Add("tensors", 0, &tensors, "print the tensor table");
  flags.Add("preset", 0, &preset, "instead of a file: the memory sizes of a make-model preset's shape");
  Status st = flags.Parse(argc, argv);
  if (!st.ok()) {
    std::fprintf(stderr, "rewind inspect: %s\n%s", st.error().message.c_str(), flags.Help().c_str());
    return 2;
  }
  if (flags.help_requested()) {
    std::printf("%s", flags.Help().c_str());
    return 0;
  }
  if (!preset.empty()) return InspectPreset(preset);
  if (path.empty()) {
    std::fprintf(stderr, "rewind inspect: give a MODEL file or --preset NAME\n");
    return 2;
  }
  auto loaded = model::Model::Load(path);
  if (!loaded.ok()) {
    std::fprintf(stderr, "rewind inspect: %s\n", loaded.error().ToString().c_str());
    return 1;
  }
  const model::Model& m = **loaded;
  const model::ModelConfig& c = m.config();
  std::printf("file:            %s (%llu bytes, GGUF v%u)\n", path.c_str(),
              static_cast<unsigned long long>(m.file().file_size()), m.file().version());
  std::printf("architecture:    %s%s%s\n", c.arch_name.c_str(), c.name.empty() ? "" : "  name: ", c.name.c_str());
  std::printf("embedding:       %d   vocab: %d   context (train): %d   rms eps: %g\n", c.n_embd, c.n_vocab,
              c.n_ctx_train, c.eps);
  std::printf("layers:          %d trunk (+%d MTP, not run): %d recurrent (%s), %d attention, %d MLP-only\n",
              c.n_layer, c.n_nextn, c.n_recurrent_layers(),
              c.is_mamba2() ? "Mamba-2" : c.is_lfm2() ? "short conv" : c.is_kimi() ? "KDA" : "GDN", c.n_attn_layers(),
              c.n_layer - c.n_recurrent_layers() - c.n_attn_layers());
  std::printf("attention:       Hq %d  Hkv %d  head dim %d  rope dims %d  base %g  scale %g%s", c.n_head,
              c.n_head_kv, c.head_dim, c.n_rot, c.rope_freq_base, c.rope_freq_scale, c.rope_yarn ? "  yarn" : "");
  if (c.imrope)
    std::printf("  imrope sections [%d, %d, %d, %d]", c.rope_sections[0], c.rope_sections[1], c.rope_sections[2],
                c.rope_sections[3]);
  std::printf("\n");
  if (c.is_kimi()) {
    std::printf("mla:             latent %d + rope part %d (no RoPE) = the cached row (as K and as V), q/k heads %d, "
                "v heads %d\n",
                c.kv_lora_rank, c.n_rot, c.mla_k, c.mla_v);
    std::printf("kda:             conv kernel %d  heads %d x %d  conv channels %d (q|k|v), per-channel decay\n",
                c.ssm_conv_kernel, c.ssm_heads, c.ssm_state, c.ssm_conv_dim());
  } else if (c.is_lfm2()) {
    std::printf("short conv:      conv kernel (l_cache) %d  channels %d (state: the last %d B·x rows)\n",
                c.ssm_conv_kernel, c.ssm_conv_dim(), c.ssm_conv_kernel - 1);
  } else if (c.is_mamba2()) {
    std::printf("mamba-2:         conv kernel %d  heads %d x %d  groups %d  state %d  conv channels %d\n",
                c.ssm_conv_kernel, c.ssm_heads, c.ssm_head_dim(), c.ssm_group, c.ssm_state, c.ssm_conv_dim());
  } else {
    std::printf("gated deltanet:  conv kernel %d  head size %d  key heads %d  value heads %d (%s)  conv channels %d\n",
                c.ssm_conv_kernel, c.ssm_state, c.ssm_group, c.ssm_heads,
                c.arch == model::Arch::kQwen3Next ? "grouped" : "tiled", c.ssm_conv_dim());
  }
  if (c.arch == model::Arch::kNemotronHMoe) {
    std::printf("ffn:             MoE layers: %d experts, top %d (sigmoid router), expert width %d, shared expert width %d\n",
                c.n_expert, c.n_expert_used, c.n_ff_exp, c.n_ff_shexp);
  } else if (c.is_kimi()) {
    std::printf("ffn:             %d dense SwiGLU blocks (width %d), then MoE: %d experts, top %d (sigmoid router, "
                "x%g), expert width %d, shared expert width %d\n",
                c.n_layer_dense_lead, c.n_ff, c.n_expert, c.n_expert_used, c.expert_weights_scale, c.n_ff_exp,
                c.n_ff_shexp);
  } else if (c.arch == model::Arch::kLfm2Moe) {
    std::printf("ffn:             %d dense SwiGLU blocks (width %d), then MoE: %d experts, top %d (sigmoid router), "
                "expert width %d\n",
                c.n_layer_dense_lead, c.n_ff, c.n_expert, c.n_expert_used, c.n_ff_exp);
  } else if (c.arch == model::Arch::kNemotronH) {
    std::printf("ffn:             ReLU² MLP layers, width %d\n", c.n_ff);
  } else if (c.softmax_moe()) {
    std::printf("ffn:             MoE %d experts, top %d (softmax router), expert width %d, shared expert width %d%s\n",
                c.n_expert, c.n_expert_used, c.n_ff_exp, c.n_ff_shexp, c.is_granite_moe() ? " (ungated)" : "");
  } else {
    std::printf("ffn:             dense SwiGLU, width %d\n", c.n_ff);
  }
  std::string kinds;
  for (auto k : c.kinds) kinds += model::KindLetter(k);
  std::printf("layer kinds:     %s  (G = gated deltanet, A = attention, M = Mamba-2, F = MLP, C = short conv, K = KDA)\n",
              kinds.c_str());
  std::printf("output head:     %s\n", m.weights().tied ? "tied to token_embd" : "output.weight");
  std::printf("\nmemory:\n");
  PrintKvBytesPerToken(c.n_attn_layers(), c.n_head_kv, c.head_dim);
  std::printf("  recurrent state per sequence (= checkpoint): %llu bytes (%.2f MiB)\n",
              static_cast<unsigned long long>(c.StateBytesPerSeq()), c.StateBytesPerSeq() / 1048576.0);
  std::printf("  replay log per token:                   %llu bytes\n",
              static_cast<unsigned long long>(c.ReplayBytesPerToken()));
  std::printf("\nweights by type:\n");
  uint64_t total = 0;
  for (const auto& tt : gguf::TotalsByType(m.file())) total += tt.bytes;
  for (const auto& tt : gguf::TotalsByType(m.file())) {
    std::printf("  %-8s %4lld tensors %14llu bytes  %5.1f%%  %6.3f bits/weight\n", gguf::TypeName(tt.type),
                static_cast<long long>(tt.tensors), static_cast<unsigned long long>(tt.bytes),
                total ? 100.0 * tt.bytes / total : 0.0, tt.elements ? 8.0 * tt.bytes / tt.elements : 0.0);
  }
  std::printf("  %-8s %4zu tensors %14llu bytes\n", "total", m.file().tensors().size(),
              static_cast<unsigned long long>(total));
  if (tensors) {
    std::printf("\ntensors (%zu):\n", m.file().tensors().size());
    for (const auto& t : m.file().tensors())
      std::printf("  %-40s %-7s %-22s %llu bytes\n", t.name.c_str(), gguf::TypeName(t.type), t.ShapeString().c_str(),
                  static_cast<unsigned long long>(t.nbytes));
  }
  return 0;
}

}  // namespace

REWIND_COMMAND("inspect", "print a model's architecture, layers, tensors and memory sizes", Inspect);

}  // namespace rw::apps
