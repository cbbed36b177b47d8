// rewind conformance DIR: compares the model's logits and greedy continuations with llama.cpp reference outputs.
#include <cstdio>

#include "apps/command.h"
#include "apps/device_flags.h"
#include "base/flags.h"
#include "model/conformance.h"

namespace rw::apps {
namespace {

int Conformance(int argc, char** argv) {
  FlagSet flags("conformance", "compare logits with llama.cpp reference outputs (fixture folder layout)");
  model::ConformanceOptions opt;
  std::string model_name, case_name;
  int threads = 1;
  int steps = -1;
  flags.Positional("DIR", &opt.dir, "fixture folder: prompts.json, ref/<model>/, models/", true);
  flags.Add("model", 'm', &model_name, "only this reference folder or model file name");
  flags.Add("case", 'c', &case_name, "only this case (prompt name)");
  flags.Add("threads", 't', &threads, "threads");
  bool kv_f16 = false;
  flags.Add("kv-f16", 0, &kv_f16, "use an F16 KV cache (serving default) instead of F32 like the references");
  flags.Add("steps", 0, &steps, "greedy steps to compare (-1 = all the reference has)");
  DeviceFlags dev;
  dev.Declare(flags);
  Status st = flags.Parse(argc, argv);
  if (!st.ok()) {
    std::fprintf(stderr, "rewind conformance: %s\n%s", st.error().message.c_str(), flags.Help().c_str());
    return 2;
  }
  if (flags.help_requested()) {
    std::printf("%s", flags.Help().c_str());
    return 0;
  }
  opt.model_filter = model_name;
  opt.case_filter = case_name;
  opt.n_threads = threads;
  opt.greedy_steps = steps;
  opt.kv_f16 = kv_f16;
  if (dev.list) {
    PrintDevices();
    return 0;
  }
  auto device = dev.Resolve();
  if (!device.ok()) {
    std::fprintf(stderr, "rewind conformance: %s\n", device.error().message.c_str());
    return 2;
  }
  opt.device = *device;
  opt.n_gpu_layers = dev.n_gpu_layers;
  auto res = model::RunConformance(opt, [](const model::CaseResult& r) {
    std::printf("%s\n", model::FormatCase(r).c_str());
    std::fflush(stdout);
  });
  if (!res.ok()) {
    std::fprintf(stderr, "rewind conformance: %s\n", res.error().ToString().c_str());
    return 1;
  }
  bool all = !res->empty();
  int passed = 0, failed = 0, skipped = 0;
  std::printf("\nsummary:\n");
  for (const auto& m : *res) {
    std::printf("  %s\n", model::FormatModel(m).c_str());
    if (m.skipped) {
      ++skipped;
    } else if (m.pass) {
      ++passed;
    } else {
      ++failed;
    }
    all = all && m.pass;
  }
  std::printf("models: %d passed, %d failed, %d skipped\n", passed, failed, skipped);
  return all ? 0 : 1;
}

}  // namespace

REWIND_COMMAND("conformance", "compare logits with llama.cpp reference outputs", Conformance);

}  // namespace rw::apps
