// `rewind make-model`: deterministic random-weight GGUF models (docs/make-model.md).
#include <cstdio>
#include <memory>
#include <string>

#include "apps/command.h"
#include "base/flags.h"
#include "base/progress.h"
#include "base/timer.h"
#include "gguf/describe.h"
#include "gguf/gguf.h"
#include "modelgen/demo_model.h"
#include "modelgen/make_model.h"
#include "modelgen/mmproj_gen.h"

namespace rw::apps {
namespace {

int MakeModelMain(int argc, char** argv) {
  std::string preset = "tiny", vocab_path, out, type = "f32", extract, name, demo_type, describe, mmproj;
  int64_t mmproj_out = 0;
  int64_t seed = 0;
  int threads = 0;
  bool list = false, quiet = false;
  FlagSet flags(
      "make-model",
      "Write a deterministic random-weight model (llama.cpp-compatible GGUF) from a preset and a vocab.");
  flags.Add("preset", 'p', &preset, "model shape: " + modelgen::PresetNames());
  flags.Add("vocab", 'v', &vocab_path,
            "GGUF whose tokenizer.* keys are copied (a vocab-only file or any model)");
  flags.Add("output", 'o', &out, "output GGUF path");
  flags.Add("type", 't', &type, "tensor type: " + modelgen::FileTypeNames());
  flags.Add("seed", 's', &seed, "random seed (0: the preset's default)");
  flags.Add("threads", 'j', &threads, "generator threads (0: all cores); the output does not depend on it");
  flags.Add("name", 0, &name, "general.name; empty: the preset name");
  flags.Add("extract-vocab", 0, &extract,
            "instead: write the tokenizer.* keys of this GGUF as a vocab-only file to -o");
  flags.Add("demo", 0, &demo_type,
            "instead: make sure the built-in demo model (f32 or q8_0) is in the cache, print its path");
  flags.Add("describe", 0, &describe, "instead: print the metadata and tensor layout of this GGUF");
  flags.Add("mmproj", 0, &mmproj,
            "instead: write a random qwen3vl_merger vision projector (mmproj) of this preset: tiny or qwen35 "
            "(Qwen3.5's vision tower; f16 matrices); --mmproj-embd is the language model's embedding length");
  flags.Add("mmproj-embd", 0, &mmproj_out, "the language model's embedding length for --mmproj (0: required)");
  flags.Add("list", 0, &list, "list the presets and types");
  flags.Add("quiet", 'q', &quiet, "no progress output");
  if (Status s = flags.Parse(argc, argv); !s.ok()) {
    std::fprintf(stderr, "rewind make-model: %s\n", s.error().message.c_str());
    return 2;
  }
  if (flags.help_requested()) {
    std::printf("%s", flags.Help().c_str());
    return 0;
  }
  if (list) {
    for (const modelgen::Preset& p : modelgen::Presets()) std::printf("%-14s %s\n", p.name, p.summary);
    std::printf("types: %s\n", modelgen::FileTypeNames().c_str());
    return 0;
  }
  if (!describe.empty()) {
    auto f = gguf::File::Open(describe);
    if (!f.ok()) {
      std::fprintf(stderr, "rewind make-model: %s\n", f.error().ToString().c_str());
      return 1;
    }
    std::printf("%s", gguf::DescribeLayout(**f).c_str());
    return 0;
  }
  if (!demo_type.empty()) {
    auto path = modelgen::EnsureDemoModel("", demo_type);
    if (!path.ok()) {
      std::fprintf(stderr, "rewind make-model: %s\n", path.error().ToString().c_str());
      return 1;
    }
    std::printf("%s\n", path->c_str());
    return 0;
  }
  if (out.empty()) {
    std::fprintf(stderr, "rewind make-model: -o OUTPUT is required (see --help)\n");
    return 2;
  }
  if (!mmproj.empty()) {
    auto cfg = modelgen::MmprojPreset(mmproj, mmproj_out);
    Status s = cfg.ok() ? modelgen::WriteMmproj(*cfg, seed != 0 ? static_cast<uint64_t>(seed) : 1, out)
                        : Status(cfg.error());
    if (!s.ok()) {
      std::fprintf(stderr, "rewind make-model: %s\n", s.error().ToString().c_str());
      return 1;
    }
    if (!quiet) std::printf("wrote %s (mmproj preset %s)\n", out.c_str(), mmproj.c_str());
    return 0;
  }
  if (!extract.empty()) {
    auto in = gguf::File::Open(extract);
    Status s = in.ok() ? modelgen::ExtractVocab(**in, out) : Status(in.error());
    if (!s.ok()) {
      std::fprintf(stderr, "rewind make-model: %s\n", s.error().ToString().c_str());
      return 1;
    }
    if (!quiet) std::printf("wrote %s\n", out.c_str());
    return 0;
  }
  if (vocab_path.empty()) {
    std::fprintf(stderr, "rewind make-model: --vocab FILE is required (see --help)\n");
    return 2;
  }
  auto vocab = gguf::File::Open(vocab_path);
  if (!vocab.ok()) {
    std::fprintf(stderr, "rewind make-model: %s\n", vocab.error().ToString().c_str());
    return 1;
  }
  modelgen::MakeModelOptions opt;
  opt.preset = preset;
  opt.file_type = type;
  opt.seed = static_cast<uint64_t>(seed);
  opt.threads = threads;
  opt.name = name;
  std::unique_ptr<Progress> progress;  // a line every few seconds with the rate and ETA (big presets)
  if (!quiet) {
    opt.progress = [&progress, &out](size_t i, size_t n, const modelgen::TensorSpec& t) {
      if (!progress) {
        progress = std::make_unique<Progress>("make-model " + out, static_cast<double>(n), "tensors");
        // Over the "[i/n] tensor" status line, which is redrawn below it.
        progress->set_sink([](const std::string& line) { std::fprintf(stderr, "\r%-60s\n", line.c_str()); });
      }
      progress->Update(static_cast<double>(i));
      std::fprintf(stderr, "\r[%zu/%zu] %-44s", i + 1, n, t.name.c_str());
      if (i + 1 == n) std::fprintf(stderr, "\n");
    };
  }
  const double t0 = NowSeconds();
  if (Status s = modelgen::MakeModel(opt, **vocab, out); !s.ok()) {
    std::fprintf(stderr, "rewind make-model: %s\n", s.error().ToString().c_str());
    return 1;
  }
  auto check = gguf::File::Open(out);
  if (!check.ok()) {
    std::fprintf(stderr, "rewind make-model: written file does not validate: %s\n",
                 check.error().message.c_str());
    return 1;
  }
  if (!quiet) {
    std::printf("wrote %s: preset %s, type %s, %zu tensors, %.1f MB in %.2f s\n", out.c_str(), preset.c_str(),
                type.c_str(), (*check)->tensors().size(), (*check)->file_size() / 1e6, NowSeconds() - t0);
  }
  return 0;
}

}  // namespace

REWIND_COMMAND("make-model", "write a deterministic random-weight model GGUF from a preset", MakeModelMain);

}  // namespace rw::apps
