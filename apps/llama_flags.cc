#include "apps/llama_flags.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "base/log.h"
#include "gpu/device.h"

namespace rw::apps {
namespace {

// llama-server spelling -> rewind flag.
struct AliasOf {
  const char* spelling;
  const char* name;
};
constexpr AliasOf kAliases[] = {
    {"-np", "parallel"},
    {"-cram", "cache-ram"},
    {"-md", "model-draft"},
    {"--spec-draft-model", "model-draft"},
    {"--draft", "draft-max"},
    {"--draft-n", "draft-max"},
    {"--spec-draft-n-max", "draft-max"},
    {"--draft-n-min", "draft-min"},
    {"--spec-draft-n-min", "draft-min"},
    {"--threads-http", "http-threads"},
};

// Flags with no effect on a CPU-only server. `value`: takes a value; `spellings` beyond the first are
// aliases.
struct NoEffect {
  std::vector<const char*> spellings;  // the first is "--name"
  bool value;
  const char* why;  // nullptr: GPU-only
};

const std::vector<NoEffect>& NoEffectFlags() {
  static const std::vector<NoEffect> flags = {
      // GPU-only.
      {{"--main-gpu", "-mg"}, true, nullptr},
      {{"--split-mode", "-sm"}, true, nullptr},
      {{"--tensor-split", "-ts"}, true, nullptr},
      {{"--n-gpu-layers-draft", "-ngld", "--gpu-layers-draft", "--spec-draft-ngl"}, true, nullptr},
      {{"--device-draft", "-devd", "--spec-draft-device"}, true, nullptr},
      {{"--override-tensor", "-ot"}, true, nullptr},
      {{"--n-cpu-moe", "-ncmoe"}, true, nullptr},
      {{"--cpu-moe", "-cmoe"}, false, nullptr},
      {{"--kv-offload", "-kvo"}, false, nullptr},
      {{"--op-offload"}, false, nullptr},
      {{"--no-host"}, false, nullptr},
      {{"--fit", "-fit"}, true, nullptr},
      {{"--fit-target", "-fitt"}, true, nullptr},
      {{"--fit-ctx", "-fitc"}, true, nullptr},
      {{"--split-mode-draft"}, true, nullptr},
      // CPU settings rewind does not have.
      {{"--cpu-mask", "-C"}, true, "threads are not pinned"},
      {{"--cpu-range", "-Cr"}, true, "threads are not pinned"},
      {{"--cpu-strict"}, true, "threads are not pinned"},
      {{"--cpu-mask-batch", "-Cb"}, true, "threads are not pinned"},
      {{"--cpu-range-batch", "-Crb"}, true, "threads are not pinned"},
      {{"--cpu-strict-batch"}, true, "threads are not pinned"},
      {{"--prio"}, true, "threads run at the default priority"},
      {{"--prio-batch"}, true, "threads run at the default priority"},
      {{"--poll"}, true, "idle threads wait instead of polling"},
      {{"--poll-batch"}, true, "idle threads wait instead of polling"},
      {{"--numa"}, true, "no NUMA placement"},
      {{"--ctx-checkpoints", "-ctxcp", "--swa-checkpoints"},
       true,
       "checkpoints are placed by the prefix cache and bounded by --cache-ram"},
      {{"--checkpoint-min-step", "-cms"},
       true,
       "checkpoints are placed by the prefix cache (--checkpoint-every)"},
      {{"--cache-reuse"}, true, "the prefix cache reuses every exact prefix; no KV shifting"},
      {{"--keep"}, true, "no context shift: a prompt that does not fit is refused"},
      {{"--context-shift"}, false, "no context shift: a prompt that does not fit is refused"},
      {{"--defrag-thold", "-dt"}, true, "the paged KV cache needs no defragmentation"},
      {{"--swa-full"}, false, "the models served have no sliding-window attention"},
      {{"--kv-unified", "-kvu"}, false, "slots share one page pool already"},
      {{"--cache-idle-slots"}, false, "idle slots stay in the prefix cache already"},
      {{"--slot-prompt-similarity", "-sps"}, true, "requests go to the slot with the longest cached prefix"},
      {{"--sleep-idle-seconds"}, true, "the model stays loaded"},
      {{"--warmup"}, false, "no warm-up run is needed"},
      {{"--reasoning-preserve"}, false, "the chat template decides which reasoning is kept"},
      {{"--reasoning-effort"}, true, "use --reasoning on|off"},
      {{"--ui-config", "--webui-config"}, true, "the built-in web page has no such settings"},
      {{"--ui-config-file", "--webui-config-file"}, true, "the built-in web page has no such settings"},
      {{"--ui-mcp-proxy", "--webui-mcp-proxy"}, false, "the built-in web page has no such settings"},
      {{"--mcp-servers-config"}, true, "the built-in web page has no such settings"},
      {{"--mcp-servers-json"}, true, "the built-in web page has no such settings"},
      {{"--tools"}, true, "the built-in web page has no such settings"},
      {{"--path"}, true, "no static files are served"},
      {{"--api-prefix"}, true, "endpoints are served at their usual paths"},
      {{"--cors-origins"}, true, "every origin may call (CORS headers are always sent)"},
      {{"--cors-methods"}, true, "every origin may call (CORS headers are always sent)"},
      {{"--cors-headers"}, true, "every origin may call (CORS headers are always sent)"},
      {{"--reuse-port"}, false, "one process per port"},
      {{"--sse-ping-interval"}, true, "keep-alive comments are sent every second while idle"},
      {{"--log-file"}, true, "logs go to stderr"},
      {{"--log-colors"}, true, "logs are plain text"},
      {{"--log-timestamps"}, false, "log lines always carry a timestamp"},
      {{"--log-prefix"}, false, "log lines always carry their level"},
      {{"--no-perf"}, false, "timings are always reported"},
  };
  return flags;
}

// Flags rewind refuses: what they ask for does not exist here.
struct Refused {
  std::vector<const char*> spellings;
  bool value;
  const char* why;
};

const std::vector<Refused>& RefusedFlags() {
  static const std::vector<Refused> flags = {
      {{"--hf-repo", "-hf", "-hfr"}, true, "models are not downloaded; pass -m FILE.gguf"},
      {{"--hf-file", "-hff"}, true, "models are not downloaded; pass -m FILE.gguf"},
      {{"--hf-token", "-hft"}, true, "models are not downloaded; pass -m FILE.gguf"},
      {{"--model-url", "-mu"}, true, "models are not downloaded; pass -m FILE.gguf"},
      {{"--docker-repo", "-dr"}, true, "models are not downloaded; pass -m FILE.gguf"},
      {{"--models-dir"}, true, "one model per server (no router mode); pass -m FILE.gguf"},
      {{"--models-preset"}, true, "one model per server (no router mode); pass -m FILE.gguf"},
      {{"--models-max"}, true, "one model per server (no router mode)"},
      {{"--lora"}, true, "LoRA adapters are not supported"},
      {{"--lora-scaled"}, true, "LoRA adapters are not supported"},
      {{"--control-vector"}, true, "control vectors are not supported"},
      {{"--mmproj-url", "-mmu"}, true, "multimodal input is not supported"},
      {{"--embedding", "--embeddings"}, false, "embeddings are not served"},
      {{"--rerank", "--reranking"}, false, "reranking is not served"},
      {{"--ssl-key-file"}, true, "no TLS; put a reverse proxy in front"},
      {{"--ssl-cert-file"}, true, "no TLS; put a reverse proxy in front"},
      {{"--override-kv"}, true, "model metadata cannot be overridden"},
      {{"--rope-scaling"}, true, "RoPE scaling cannot be changed (the model's own is used)"},
      {{"--rope-scale"}, true, "RoPE scaling cannot be changed (the model's own is used)"},
      {{"--rope-freq-base"}, true, "RoPE scaling cannot be changed (the model's own is used)"},
      {{"--rope-freq-scale"}, true, "RoPE scaling cannot be changed (the model's own is used)"},
      {{"--chat-template"},
       true,
       "built-in template names and inline templates are not supported; pass "
       "--chat-template-file FILE (the model's own template is the default)"},
  };
  return flags;
}

// "--n-gpu-layers/-ngl" for warnings.
std::string Display(const std::vector<const char*>& spellings) {
  std::string out = spellings[0];
  if (spellings.size() > 1) out += std::string("/") + spellings[1];
  return out;
}

}  // namespace

void LlamaServerFlags::Declare(FlagSet& flags) {
  for (const auto& a : kAliases) flags.Alias(a.spelling, a.name);
  flags.Add("threads-batch", 0, &threads_batch_,
            "llama-server: threads for prompt processing; rewind uses --threads for both (0 = same)");
  flags.Alias("-tb", "threads-batch");  // after the flag, so that its help lists the alias
  flags.Add(
      "ubatch-size", 0, &ubatch_,
      "llama-server: physical batch; rewind's forward batch is --batch-size, which this sets when -b is "
      "not given (0 = unset)");
  flags.Alias("-ub", "ubatch-size");
  flags.Add("predict", 'n', &n_predict_,
            "default max tokens per answer when a request gives none (-1 = no limit)");
  flags.Alias("--n-predict", "predict");
  flags.Add(
      "chat-template-kwargs", 0, &chat_template_kwargs_,
      "JSON object of chat template variables for every request (requests' own chat_template_kwargs win), "
      "e.g. '{\"enable_thinking\": false}'");
  flags.Add("reasoning-format", 0, &reasoning_format_,
            "none: thoughts stay in the content; deepseek | auto: they go to reasoning_content; "
            "deepseek-legacy: to reasoning_content and, as <think>...</think>, to the content as well");
  flags.Add("reasoning", 0, &reasoning_, "thinking on | off | auto (auto: the chat template's default)");
  flags.Alias("-rea", "reasoning");
  flags.Add(
      "reasoning-budget", 0, &reasoning_budget_,
      "thinking token budget as llama-server: -1 unrestricted, 0 thinking off, N: the thoughts are ended "
      "after N tokens");
  flags.Add(
      "reasoning-budget-message", 0, &reasoning_budget_message_,
      "text inserted before the forced end of thinking when the reasoning budget runs out");
  flags.Add("device", 0, &device_,
            "where the forward runs: cpu, vulkanN (rewind --list-devices) or auto (the first Vulkan GPU when "
            "-ngl > 0, else the CPU; CPU Vulkan drivers such as lavapipe are never picked automatically)");
  flags.Alias("-dev", "device");
  flags.Add("n-gpu-layers", 0, &n_gpu_layers_,
            "layers on the GPU: 0 = the CPU, -1 or >= the layer count = the whole model (with --device vulkanN or "
            "a GPU found by auto); partial offload is not supported yet");
  flags.Alias("-ngl", "n-gpu-layers");
  flags.Alias("--gpu-layers", "n-gpu-layers");
  flags.Add("timeout", 0, &timeout_, "HTTP read/write timeout in seconds");
  flags.Alias("-to", "timeout");
  flags.Add("api-key-file", 0, &api_key_file_,
            "file of API keys, one per line (blank lines and lines starting with # are skipped), accepted "
            "besides --api-key");
  flags.Add("mlock", 0, &mlock_, "lock the model and caches in RAM (mlockall) once loaded");
  flags.Add("mmap", 0, &mmap_, "llama-server --no-mmap: rewind always maps the model file (no effect)");
  flags.Add("jinja", 0, &jinja_, "llama-server --jinja: rewind always renders the model's Jinja template");
  flags.Add("metrics", 0, &metrics_, "llama-server --metrics: /metrics is always served");
  flags.Add("props", 0, &props_, "allow POST /props (llama-server --props)");
  flags.Add("slots", 0, &slots_, "serve GET /slots (--no-slots turns it off)");
  flags.Add("cache-prompt", 0, &cache_prompt_,
            "llama-server spelling of --cache (--no-cache-prompt = --no-cache)");
  flags.Add("cont-batching", 0, &cont_batching_, "llama-server: batching is always continuous");
  flags.Alias("-cb", "cont-batching");
  flags.Alias("-nocb", "cont-batching", /*negate=*/true);
  flags.AddOptionalValue("flash-attn", 0, &flash_attn_, "on",
                         "llama-server: on | off | auto; no effect (rewind's attention is always blockwise)");
  flags.Alias("-fa", "flash-attn");
  flags.Add("verbose", 'v', &verbose_, "debug logging");
  flags.Alias("--log-verbose", "verbose");
  flags.Add("log-disable", 0, &log_disable_, "errors only");
  flags.Add("verbosity", 0, &verbosity_,
            "llama-server log verbosity: <= 1 errors, 2 warnings, 3 info, >= 4 debug");
  flags.Alias("-lv", "verbosity");
  flags.Alias("--log-verbosity", "verbosity");
  auto declare = [&](const std::vector<const char*>& spellings, bool value, const std::string& help) {
    std::string name = std::string(spellings[0]).substr(2);
    if (value) {
      values_.emplace_back();
      flags.Add(name, 0, &values_.back(), help);
    } else {
      bools_.push_back(false);
      flags.Add(name, 0, &bools_.back(), help);
    }
    for (size_t i = 1; i < spellings.size(); ++i) flags.Alias(spellings[i], name);
    return name;
  };
  for (const auto& f : NoEffectFlags()) {
    std::string name = declare(f.spellings, f.value,
                               std::string("llama-server; no effect: ") + (f.why ? f.why : "GPU only"));
    ignored_.push_back({name, Display(f.spellings), f.why ? f.why : ""});
  }
  flags.Alias("-nkvo", "kv-offload", /*negate=*/true);
  for (const auto& f : RefusedFlags()) {
    std::string name = declare(f.spellings, f.value, std::string("llama-server; refused: ") + f.why);
    refused_.emplace_back(name, f.why);
  }
}

Status LlamaServerFlags::Apply(const FlagSet& flags, engine::EngineConfig* ec, server::ServerConfig* sc) {
  for (const auto& [name, why] : refused_) {
    if (flags.IsSet(name)) return Error::InvalidArgument("--" + name + " is not supported by rewind: " + why);
  }
  std::string gpu;
  for (const auto& f : ignored_) {
    if (!flags.IsSet(f.name)) continue;
    if (f.why.empty()) {
      gpu += (gpu.empty() ? "" : ", ") + f.display;
    } else {
      LOG_WARN("%s has no effect: %s", f.display.c_str(), f.why.c_str());
    }
  }
  // --device / -ngl (docs/gpu.md): auto takes the first Vulkan device that is a real GPU when -ngl asks for
  // layers; without one, -ngl keeps its llama-server meaning of "no GPU here" and is only warned about.
  if (device_ == "auto") {
    ec->device = -1;
    if (n_gpu_layers_ > 0) {
      auto devs = gpu::ListDevices();
      if (devs.ok())
        for (const gpu::DeviceInfo& d : *devs)
          if (d.type != "cpu") {
            ec->device = d.index;
            break;
          }
    }
    if (ec->device < 0 && flags.IsSet("n-gpu-layers") && n_gpu_layers_ != 0)
      gpu += std::string(gpu.empty() ? "" : ", ") + "--n-gpu-layers/-ngl";
  } else {
    REWIND_ASSIGN_OR_RETURN(ec->device, gpu::ParseDeviceName(device_));
    if (ec->device < 0 && flags.IsSet("n-gpu-layers") && n_gpu_layers_ != 0)
      gpu += std::string(gpu.empty() ? "" : ", ") + "--n-gpu-layers/-ngl";
  }
  if (n_gpu_layers_ == 0) ec->device = -1;
  ec->n_gpu_layers = n_gpu_layers_;
  if (flags.IsSet("flash-attn")) gpu += std::string(gpu.empty() ? "" : ", ") + "-fa";
  if (!gpu.empty()) LOG_WARN("%s: no effect (GPU-only; rewind runs on the CPU)", gpu.c_str());
  if (flags.IsSet("mmap") && !mmap_) LOG_WARN("--no-mmap has no effect: rewind always maps the model file");
  if (flags.IsSet("jinja") && !jinja_)
    LOG_WARN("--no-jinja has no effect: rewind always renders the Jinja template");
  if (flags.IsSet("cont-batching") && !cont_batching_) LOG_WARN("--no-cont-batching has no effect");
  if (flags.IsSet("threads-batch") && threads_batch_ != ec->n_threads && threads_batch_ > 0) {
    if (!flags.IsSet("threads")) {
      ec->n_threads = threads_batch_;
    } else {
      LOG_WARN("-tb %d has no effect: rewind uses one thread pool (--threads %d)", threads_batch_,
               ec->n_threads);
    }
  }
  if (flags.IsSet("ubatch-size") && ubatch_ > 0) {
    if (!flags.IsSet("batch-size")) {
      ec->n_batch = ubatch_;
    } else if (ubatch_ != ec->n_batch) {
      LOG_WARN("-ub %d has no effect: rewind's forward batch is --batch-size %d", ubatch_, ec->n_batch);
    }
  }
  if (flags.IsSet("cache-prompt")) ec->cache = cache_prompt_;
  if (!chat_template_kwargs_.empty()) {
    auto kw = nlohmann::ordered_json::parse(chat_template_kwargs_, nullptr, false);
    if (kw.is_discarded() || !kw.is_object())
      return Error::InvalidArgument("--chat-template-kwargs must be a JSON object, got '" +
                                    chat_template_kwargs_ + "'");
    sc->chat_template_kwargs = kw;
  }
  if (reasoning_format_ != "none" && reasoning_format_ != "deepseek" && reasoning_format_ != "auto" &&
      reasoning_format_ != "deepseek-legacy")
    return Error::InvalidArgument("--reasoning-format must be none, deepseek, deepseek-legacy or auto");
  sc->reasoning_format = reasoning_format_;
  if (reasoning_budget_ < -1) return Error::InvalidArgument("--reasoning-budget must be -1 or more");
  sc->reasoning_budget = reasoning_budget_;
  sc->reasoning_budget_message = reasoning_budget_message_;
  if (reasoning_ != "on" && reasoning_ != "off" && reasoning_ != "auto")
    return Error::InvalidArgument("--reasoning must be on, off or auto");
  if (reasoning_ != "auto" && !sc->chat_template_kwargs.contains("enable_thinking"))
    sc->chat_template_kwargs["enable_thinking"] = reasoning_ == "on";
  if (timeout_ <= 0) return Error::InvalidArgument("--timeout must be positive");
  sc->timeout_s = timeout_;
  sc->default_n_predict = n_predict_;
  sc->props_endpoint = props_;
  sc->slots_endpoint = slots_;
  if (!api_key_file_.empty()) {
    std::ifstream in(api_key_file_);
    if (!in) return Error::InvalidArgument("--api-key-file: cannot open " + api_key_file_);
    for (std::string line; std::getline(in, line);) {
      while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
      size_t b = line.find_first_not_of(" \t");
      if (b == std::string::npos || line[b] == '#') continue;
      sc->api_keys.push_back(line.substr(b));
    }
    if (sc->api_keys.empty()) return Error::InvalidArgument("--api-key-file: no key in " + api_key_file_);
  }
  if (log_disable_) SetLogLevel(LogLevel::kError);
  if (flags.IsSet("verbosity")) {
    SetLogLevel(verbosity_ <= 1   ? LogLevel::kError
                : verbosity_ == 2 ? LogLevel::kWarn
                : verbosity_ == 3 ? LogLevel::kInfo
                                  : LogLevel::kDebug);
  }
  if (verbose_) SetLogLevel(LogLevel::kDebug);
  return Status::Ok();
}

void LlamaServerFlags::AfterLoad() const {
  if (!mlock_) return;
  if (mlockall(MCL_CURRENT | MCL_FUTURE) != 0) {
    LOG_WARN("--mlock: mlockall failed (%s); raise 'ulimit -l' or run with CAP_IPC_LOCK",
             std::strerror(errno));
  } else {
    LOG_INFO("--mlock: the model and caches are locked in RAM");
  }
}

}  // namespace rw::apps
