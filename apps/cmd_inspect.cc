// rewind inspect MODEL: architecture, hyperparameters, layer kinds, tensors and memory sizes.
#include <cstdio>
#include <string>

#include "apps/command.h"
#include "base/flags.h"
#include "model/forward.h"

namespace rw::apps {
namespace {

int Inspect(int argc, char** argv) {
  FlagSet flags("inspect", "print a model's architecture, hyperparameters, layers, tensors and memory sizes");
  std::string path;
  bool tensors = true;
  flags.Positional("MODEL", &path, "GGUF model file", true);
  flags.Add("tensors", 0, &tensors, "print the tensor table");
  Status st = flags.Parse(argc, argv);
  if (!st.ok()) {
    std::fprintf(stderr, "rewind inspect: %s\n%s", st.error().message.c_str(), flags.Help().c_str());
    return 2;
  }
  if (flags.help_requested()) {
    std::printf("%s", flags.Help().c_str());
    return 0;
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
  std::printf("layers:          %d trunk (+%d MTP, not run): %d GDN, %d attention\n", c.n_layer, c.n_nextn,
              c.n_gdn_layers(), c.n_attn_layers());
  std::printf("attention:       Hq %d  Hkv %d  head dim %d  rope dims %d  base %g  scale %g%s", c.n_head,
              c.n_head_kv, c.head_dim, c.n_rot, c.rope_freq_base, c.rope_freq_scale, c.rope_yarn ? "  yarn" : "");
  if (c.imrope)
    std::printf("  imrope sections [%d, %d, %d, %d]", c.rope_sections[0], c.rope_sections[1], c.rope_sections[2],
                c.rope_sections[3]);
  std::printf("\n");
  std::printf("gated deltanet:  conv kernel %d  head size %d  key heads %d  value heads %d (%s)  conv channels %d\n",
              c.ssm_conv_kernel, c.ssm_state, c.ssm_group, c.ssm_heads,
              c.arch == model::Arch::kQwen3Next ? "grouped" : "tiled", c.ssm_conv_dim());
  if (c.is_moe()) {
    std::printf("ffn:             MoE %d experts, top %d, expert width %d, shared expert width %d\n", c.n_expert,
                c.n_expert_used, c.n_ff_exp, c.n_ff_shexp);
  } else {
    std::printf("ffn:             dense SwiGLU, width %d\n", c.n_ff);
  }
  std::string kinds;
  for (auto k : c.kinds) kinds += k == model::LayerKind::kGdn ? 'G' : 'A';
  std::printf("layer kinds:     %s  (G = gated deltanet, A = attention)\n", kinds.c_str());
  std::printf("output head:     %s\n", m.weights().tied ? "tied to token_embd" : "output.weight");
  std::printf("\nmemory:\n");
  std::printf("  attention KV per token (F16):           %llu bytes (F32: %llu)\n",
              static_cast<unsigned long long>(c.KvBytesPerToken(2)),
              static_cast<unsigned long long>(c.KvBytesPerToken(4)));
  std::printf("  recurrent state per sequence (= checkpoint): %llu bytes (%.2f MiB)\n",
              static_cast<unsigned long long>(c.StateBytesPerSeq()), c.StateBytesPerSeq() / 1048576.0);
  std::printf("  replay log per token:                   %llu bytes\n",
              static_cast<unsigned long long>(c.ReplayBytesPerToken()));
  if (tensors) {
    std::printf("\ntensors (%zu):\n", m.file().tensors().size());
    for (const auto& t : m.file().tensors())
      std::printf("  %-40s %-6s %-22s %llu bytes\n", t.name.c_str(), gguf::TypeName(t.type), t.ShapeString().c_str(),
                  static_cast<unsigned long long>(t.nbytes));
  }
  return 0;
}

}  // namespace

REWIND_COMMAND("inspect", "print a model's architecture, layers, tensors and memory sizes", Inspect);

}  // namespace rw::apps
