// rewind serve: the OpenAI / llama-server compatible HTTP server (server/). Wiring only: flags ->
// EngineConfig + ServerConfig, listen at once (503 while loading), load the model (or the built-in demo
// model), serve until SIGINT/SIGTERM.
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "apps/command.h"
#include "apps/image_flags.h"
#include "apps/kv_flags.h"
#include "apps/llama_flags.h"
#include "apps/model_backend.h"
#include "apps/limit_flags.h"
#include "apps/sampling_flags.h"
#include "base/flags.h"
#include "base/log.h"
#include "engine/engine_config.h"
#include "server/server.h"

namespace rw::apps {
namespace {

std::string FileStem(const std::string& path) {
  size_t slash = path.find_last_of('/');
  std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  if (name.size() > 5 && name.compare(name.size() - 5, 5, ".gguf") == 0) name.resize(name.size() - 5);
  return name;
}

int Serve(int argc, char** argv) {
  engine::EngineConfig ec;
  ec.cache_dir = "auto";  // serving persists its prefix cache by default (restarts lose nothing)
  server::ServerConfig sc;
  std::string chat_template_file;
  int port = sc.port, n_ctx = ec.n_ctx, n_parallel = ec.n_parallel, n_threads = ec.n_threads,
      n_batch = ec.n_batch, checkpoint_every = ec.checkpoint_every, draft_max = ec.draft_max,
      draft_min = ec.draft_min, http_threads = sc.http_threads;
  int64_t cache_ram = ec.cache_ram_mib, cache_device = ec.cache_device_mib, cache_disk = ec.cache_disk_mib;
  bool cache = ec.cache, log_requests = sc.log_requests;
  FlagSet flags("serve", "OpenAI-compatible (and llama-server compatible) HTTP server");
  flags.Add("model", 'm', &ec.model_path, "GGUF model file; none: the built-in demo model (random weights)");
  flags.Add("alias", 'a', &ec.model_alias,
            "model name reported by /v1/models and in responses; none: the file name");
  flags.Add("host", 0, &sc.host, "address to listen on");
  flags.Add("port", 0, &port, "port to listen on (0: any free port)");
  flags.Add("ctx-size", 'c', &n_ctx,
            "context per sequence; 0 = the model's training context (the memory it needs is printed at "
            "load); may exceed the training context (warned)");
  flags.Add("parallel", 0, &n_parallel, "sequence slots served concurrently");
  flags.Add("threads", 't', &n_threads, "compute threads (0 = number of cores)");
  flags.Add("batch-size", 'b', &n_batch, "max tokens per forward batch (prefill chunk)");
  AddKvTypeFlags(flags, &ec);
  flags.Add("cache", 0, &cache, "prefix cache across requests (--no-cache turns it off)");
  flags.Add("cache-ram", 0, &cache_ram,
            "RAM budget in MiB for attention pages and checkpoints of running requests and the cache, never "
            "exceeded: requests reserve theirs and wait when it is full; on a GPU the checkpoints alone (0 = half the "
            "free memory, at most 8 GiB)");
  flags.Add("cache-device", 0, &cache_device,
            "on a GPU: device memory in MiB for the attention pages (running requests and the cache); --cache-ram "
            "then bounds the checkpoints, in host memory (0 = every slot's full context twice over, at most what "
            "the device holds)");
  flags.Add("cache-dir", 0, &ec.cache_dir,
            "disk tier and persistence folder (\"\" = off; auto = a per-model folder under ~/.cache/rewind, so a "
            "restarted server resumes its cache; the demo model is stored there too)");
  flags.Add("cache-disk", 0, &cache_disk, "disk tier bound in MiB");
  flags.Add("cache-disk-wait", 0, &sc.cache_disk_wait_ms,
            "milliseconds a finished response's last event (the body, the final SSE events) waits until its end "
            "state is on disk, so that a crash right after an answer loses none of it; past that it is sent anyway "
            "(counted in /metrics); 0 = never wait");
  flags.Add("remote-cache", 0, &ec.remote_cache,
            "remote tier shared by replicas of the same model file and build: redis://HOST:PORT[/DB], a Redis "
            "server or Cluster, or rediss://... over TLS (\"\" = off; docs/replicas.md)");
  flags.Add("remote-cache-ttl", 0, &ec.remote_cache_ttl_s,
            "expiry in seconds of what this replica writes to the remote tier (0 = none: Redis' maxmemory policy "
            "evicts)");
  flags.Add("remote-cache-wait", 0, &ec.remote_cache_wait_ms,
            "milliseconds a request waits for a checkpoint another replica announced but has not written yet, "
            "instead of recomputing it (0 = never wait)");
  flags.Add("remote-cache-key-file", 0, &ec.remote_cache_key_file,
            "file holding the key (>= 16 bytes, the same on every replica) that authenticates remote-tier values "
            "with HMAC-SHA256; a value without the right MAC is rejected (docs/replicas.md)");
  flags.Add("remote-cache-key", 0, &ec.remote_cache_key,
            "the remote-tier key inline (visible in the process list: prefer --remote-cache-key-file)");
  flags.Add("remote-cache-trust", 0, &ec.remote_cache_trust,
            "use the remote tier without a key: anyone who can write to that Redis can plant cache entries that "
            "every replica serves (--remote-cache needs a key or this)");
  flags.Add("remote-cache-max-fetch", 0, &ec.remote_cache_max_fetch_mib,
            "MiB one remote-tier lookup may read from Redis (a deeper checkpoint is then not fetched)");
  flags.Add("remote-cache-tls-ca", 0, &ec.remote_cache_tls_ca,
            "rediss:// only: PEM file of the CA certificates that verify the Redis servers' certificates (\"\" = "
            "the system's CA store); each certificate must name the host or IP address the replica dials");
  flags.Add("remote-cache-tls-cert", 0, &ec.remote_cache_tls_cert,
            "rediss:// only: PEM client certificate presented to Redis servers that require one (tls-auth-clients; "
            "\"\" = none; needs --remote-cache-tls-key)");
  flags.Add("remote-cache-tls-key", 0, &ec.remote_cache_tls_key,
            "rediss:// only: PEM private key of --remote-cache-tls-cert (\"\" = none)");
  flags.Add("checkpoint-every", 0, &checkpoint_every,
            "checkpoint every N tokens inside long messages (0 = off)");
  flags.Add("slot-save-path", 0, &ec.slot_save_path, "folder for /slots save|restore (none: --cache-dir)");
  flags.Add("lazy-rollback", 0, &ec.lazy_rollback,
            "re-apply a rollback's kept tokens inside the next forward instead of at once (same results; "
            "--no-lazy-rollback replays at once)");
  flags.Add("sample-top-k", 0, &ec.sample_top_k,
            "sample from each row's best K logits where the sampler settings allow it (same tokens; a GPU then "
            "downloads 8*K bytes per row instead of the row; --no-sample-top-k: always full rows)");
  flags.Add("spec", 0, &ec.spec, "speculative decoding: mtp, draft, ngram or comma-combined (\"\" = off)");
  flags.Add("model-draft", 0, &ec.model_draft, "draft model GGUF for --spec draft");
  flags.Add("draft-max", 0, &draft_max, "max drafted tokens per step");
  flags.Add("draft-min", 0, &draft_min, "min drafted tokens per step");
  flags.Add("draft-vocab", 0, &ec.draft_vocab,
            "MTP drafts among the first N token ids only (the frequent ones; a cheaper head), 0 = all");
  flags.Add("spec-synth-accept", 0, &ec.spec_synth_accept,
            "benchmark only: accept drafted tokens with this probability instead of verifying (-1 = off; the "
            "output is then not the model's)");
  flags.Add("api-key", 0, &sc.api_key,
            "require 'Authorization: Bearer KEY'; several keys separated by commas (none: $REWIND_API_KEY if "
            "set; docs/security.md)");
  flags.Add("chat-template-file", 0, &chat_template_file, "Jinja chat template overriding the model's");
  flags.Add("http-threads", 0, &http_threads, "HTTP worker threads (0 = 64)");
  flags.Add("log-requests", 0, &log_requests, "one log line per request");
  SamplingFlags sampling;
  sampling.Register(&flags);
  LimitFlags limits;
  limits.Register(&flags, &sc);
  flags.Add("webui", 0, &sc.webui, "serve the built-in web page at / (--no-webui turns it off)");
  ImageFlags image_flags;
  image_flags.Declare(flags);
  LlamaServerFlags llama_flags;  // llama-server command lines (apps/llama_flags.h); after rewind's own flags
  llama_flags.Declare(flags);
  Status st = flags.Parse(argc, argv);
  if (!st.ok()) {
    std::fprintf(stderr, "rewind serve: %s\n%s", st.error().message.c_str(), flags.Help().c_str());
    return 2;
  }
  if (flags.help_requested()) {
    std::printf("%s", flags.Help().c_str());
    return 0;
  }
  ec.n_ctx = n_ctx;
  ec.n_parallel = n_parallel;
  ec.n_threads = n_threads;
  ec.n_batch = n_batch;
  ec.checkpoint_every = checkpoint_every;
  ec.draft_max = draft_max;
  ec.draft_min = draft_min;
  ec.cache = cache;
  ec.cache_ram_mib = cache_ram;
  ec.cache_device_mib = cache_device;
  ec.cache_disk_mib = cache_disk;
  sc.port = port;
  sc.http_threads = http_threads;
  sc.log_requests = log_requests;
  auto sampling_defaults = sampling.Resolve();
  if (!sampling_defaults.ok()) {
    std::fprintf(stderr, "rewind serve: %s\n", sampling_defaults.error().message.c_str());
    return 2;
  }
  sc.sampling_defaults = *sampling_defaults;
  sc.default_seed = sampling.seed();
  if (Status applied = limits.Apply(&sc); !applied.ok()) {
    std::fprintf(stderr, "rewind serve: %s\n", applied.error().message.c_str());
    return 2;
  }
  if (Status applied = llama_flags.Apply(flags, &ec, &sc); !applied.ok()) {
    std::fprintf(stderr, "rewind serve: %s\n", applied.error().message.c_str());
    return 2;
  }
  if (sc.api_key.empty()) {
    if (const char* env = std::getenv("REWIND_API_KEY")) sc.api_key = env;
  }
  if (sc.cache_disk_wait_ms < 0) {
    std::fprintf(stderr, "rewind serve: --cache-disk-wait must be >= 0 (milliseconds; 0 = never wait)\n");
    return 2;
  }
  if (port < 0 || port > 65535) {
    std::fprintf(stderr, "rewind serve: --port must be in [0, 65535]\n");
    return 2;
  }
  // Check the flags before binding (the model path is filled in below when the demo model is used).
  {
    engine::EngineConfig probe = ec;
    if (probe.model_path.empty()) probe.model_path = "(demo)";
    Status valid = probe.Validate();
    if (!valid.ok()) {
      std::fprintf(stderr, "rewind serve: %s\n", valid.error().message.c_str());
      return 2;
    }
  }
  bool demo = ec.model_path.empty();
  sc.model_name = !ec.model_alias.empty() ? ec.model_alias : demo ? "rewind-demo" : FileStem(ec.model_path);

  // Signals are handled by sigwait in this thread; every thread started below inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  server::Server http(sc);
  auto bound = http.Bind();
  if (!bound.ok()) {
    std::fprintf(stderr, "rewind serve: %s\n", bound.error().message.c_str());
    return 1;
  }
  LOG_INFO("listening on http://%s:%d (answers 503 until the model is loaded)%s%s", sc.host.c_str(), *bound,
           sc.api_key.empty() && sc.api_keys.empty() ? "" : ", API key required", sc.webui ? "; web page at /" : "");
  std::thread http_thread([&] { http.Run(); });

  std::atomic<bool> load_failed{false};
  LoadedModel model;
  std::thread loader([&] {
    if (demo) {
      LOG_INFO(
          "no -m given: serving the built-in demo model (tiny, random weights: for trying the API, its "
          "answers are gibberish)");
      auto path = DemoModelPath(ec.cache_dir == "auto" ? "" : ec.cache_dir);
      if (!path.ok()) {
        LOG_ERROR("demo model: %s", path.error().ToString().c_str());
        http.SetLoadFailed(path.error().message);
        load_failed = true;
        kill(getpid(), SIGTERM);
        return;
      }
      ec.model_path = *path;
    }
    const auto kv_types = ec.CacheTypes();  // validated above
    LOG_INFO("loading %s (ctx %d per slot, %d slots, kv %s, cache %s%s%s)", ec.model_path.c_str(), ec.n_ctx,
             ec.n_parallel, kv_types.ok() ? kernels::KvTypesName(*kv_types).c_str() : "?", ec.cache ? "on" : "off",
             ec.spec.empty() ? "" : ", spec ",
             ec.spec.c_str());
    auto loaded = LoadModel(ec, chat_template_file);
    if (!loaded.ok()) {
      LOG_ERROR("cannot load %s: %s", ec.model_path.c_str(), loaded.error().ToString().c_str());
      http.SetLoadFailed(loaded.error().message);
      load_failed = true;
      kill(getpid(), SIGTERM);
      return;
    }
    model = std::move(*loaded);
    llama_flags.AfterLoad();
    engine::EngineInfo info = model.engine->Info();
    auto images = image_flags.Load(info, ec.n_threads > 0 ? ec.n_threads : static_cast<int32_t>(std::thread::hardware_concurrency()));
    if (!images.ok()) {
      LOG_ERROR("%s", images.error().ToString().c_str());
      http.SetLoadFailed(images.error().message);
      load_failed = true;
      kill(getpid(), SIGTERM);
      return;
    }
    model.images = std::move(*images);
    if (model.images)
      LOG_INFO("image input on: %s (%d..%d tokens per image)", image_flags.mmproj.c_str(), image_flags.min_tokens,
               image_flags.max_tokens);
    if (info.n_ctx_train > 0 && info.n_ctx > info.n_ctx_train) {
      LOG_WARN("context %d per slot exceeds the model's training context %d: quality may drop past it",
               info.n_ctx, info.n_ctx_train);
    }
    LOG_INFO(
        "loaded %s as '%s': vocab %d, context %d per slot (trained %d), %d slots, resident memory %.1f MiB",
        info.model_path.c_str(), sc.model_name.c_str(), info.n_vocab, info.n_ctx, info.n_ctx_train,
        info.n_parallel, ResidentBytes() / 1048576.0);
    http.SetBackend(model.backend());
    LOG_INFO("ready: http://%s:%d/v1/chat/completions", sc.host.c_str(), *bound);
  });

  int sig = 0;
  sigwait(&signals, &sig);
  loader.join();
  if (!load_failed) LOG_INFO("signal %d: shutting down", sig);
  http.Stop();
  http_thread.join();
  return load_failed ? 1 : 0;
}

}  // namespace

REWIND_COMMAND("serve", "OpenAI-compatible HTTP server (chat, completions, tokenize, slots, metrics)", Serve);

}  // namespace rw::apps
