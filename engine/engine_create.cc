// Building the engine: the model, the cache and its tiers, the drafters, sized from the flags and the machine's
// memory; and its shutdown. The scheduler is engine_impl.cc, speculative decoding engine_speculate.cc.
#include "engine/engine_impl.h"
#include "engine/engine_images.h"

#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <filesystem>
#include <future>
#include <limits>
#include <sstream>
#include <thread>

#include "base/cache_root.h"
#include "base/cpu_features.h"
#include "base/file.h"
#include "base/hex.h"
#include "base/log.h"
#include "base/timer.h"
#include "tokenizer/tokenizer.h"

namespace rw::engine {
namespace {


int64_t AvailableMemoryBytes() {
  auto text = ReadFileToString("/proc/meminfo");
  if (!text.ok()) return int64_t{4} << 30;
  std::istringstream in(*text);
  std::string key;
  int64_t kb = 0;
  std::string unit;
  while (in >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  return int64_t{4} << 30;
}

// "auto": a per-model folder under CacheRoot() (~/.cache/rewind), so a restarted server finds
// its cache again and different models never share files.
std::string ResolveCacheDir(const std::string& dir, uint64_t fingerprint) {
  if (dir != "auto") return dir;
  return CacheRoot() + "/prompt-cache/" + HexU64(fingerprint);
}

std::string BaseName(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

Expected<std::unique_ptr<Engine>> CreateEngine(const EngineConfig& config) {
  auto e = EngineImpl::Create(config);
  if (!e.ok()) return e.error();
  return std::unique_ptr<Engine>(std::move(e).value());
}

namespace {

// What the chosen context costs when every slot fills it: attention KV (pages, from the --cache-ram budget) and
// the recurrent state of each live sequence (checkpoints come on top, within the same budget).
void LogContextMemory(const model::ModelConfig& cfg, kernels::KvTypes kv, int32_t n_ctx, int32_t n_parallel) {
  const double mib = 1048576.0;
  const double kv_slot = static_cast<double>(cfg.KvBytesPerToken(kv)) * n_ctx;
  const double state_slot = static_cast<double>(cfg.StateBytesPerSeq());
  LOG_INFO("context %d tokens per slot needs %.1f MiB per slot (attention KV %.1f MiB + recurrent state %.1f "
           "MiB), %.1f MiB for %d slots",
           n_ctx, (kv_slot + state_slot) / mib, kv_slot / mib, state_slot / mib,
           (kv_slot + state_slot) * n_parallel / mib, n_parallel);
}

}  // namespace

Expected<std::unique_ptr<EngineImpl>> EngineImpl::Create(const EngineConfig& config) {
  REWIND_RETURN_IF_ERROR(config.Validate());
  std::unique_ptr<EngineImpl> e(new EngineImpl(config));
  model::LoadOptions lo;
  lo.n_threads = config.n_threads > 0 ? config.n_threads
                                       : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  lo.device = config.device;
  lo.n_gpu_layers = config.n_gpu_layers;
  REWIND_ASSIGN_OR_RETURN(e->model_, model::Model::Load(config.model_path, lo));
  const auto& cfg = e->model_->config();
  e->config_.cache_dir = ResolveCacheDir(config.cache_dir, ModelFingerprint(e->model_->file()));
  if (!config.cache) e->config_.cache_dir.clear();
  REWIND_ASSIGN_OR_RETURN(auto tok, tokenizer::Tokenizer::FromGguf(e->model_->file()));
  e->eog_ = tok->eog_ids();
  e->vocab_ = MakeSamplerVocab(std::shared_ptr<const tokenizer::Tokenizer>(std::move(tok)));

  int32_t n_ctx_train = cfg.n_ctx_train;
  int32_t n_ctx = config.n_ctx > 0 ? config.n_ctx : n_ctx_train > 0 ? n_ctx_train : 4096;
  if (n_ctx_train > 0 && n_ctx > n_ctx_train)
    LOG_WARN("context %d exceeds the model's training context %d (not capped; quality may suffer)", n_ctx,
             n_ctx_train);

  HybridCacheConfig hc;
  REWIND_ASSIGN_OR_RETURN(hc.kv_type, config.CacheTypes());
  hc.n_seq_max = config.n_parallel;
  hc.n_ctx = n_ctx;
  hc.checkpoint_every = config.checkpoint_every;
  hc.use_cache = config.cache;
  hc.lazy_rollback = config.lazy_rollback;
  hc.disk_dir = e->config_.cache_dir;
  hc.disk_bytes = config.cache_disk_mib << 20;
  hc.remote_url = config.remote_cache;
  hc.remote_ttl_s = config.remote_cache_ttl_s;
  hc.remote_wait_ms = config.remote_cache_wait_ms;
  if (!config.remote_cache.empty()) {
    REWIND_ASSIGN_OR_RETURN(hc.remote_mac_key, config.RemoteCacheKey());
  }
  hc.remote_trust = config.remote_cache_trust;
  hc.remote_max_fetch_bytes = config.remote_cache_max_fetch_mib << 20;
  hc.remote_tls = {config.remote_cache_tls_ca, config.remote_cache_tls_cert, config.remote_cache_tls_key};
  if (config.cache_ram_mib > 0) {
    hc.budget_bytes = config.cache_ram_mib << 20;
  } else {
    // Default: half of the available memory, at most 8 GiB, at least what the live sequences need to reach
    // a quarter of their context.
    int64_t avail = AvailableMemoryBytes();
    hc.budget_bytes = std::min<int64_t>(avail / 2, int64_t{8} << 30);
  }
  // The drafters first: a draft model on the GPU holds device memory the KV page pool must leave free.
  if (!config.spec.empty()) {
    std::stringstream ss(config.spec);
    std::string kind;
    while (std::getline(ss, kind, ',')) {
      if (kind == "ngram") {
        e->drafters_.push_back(MakeNgramDrafter(3));
      } else if (kind == "mtp") {
        REWIND_ASSIGN_OR_RETURN(auto d, MakeMtpDrafter(*e->model_, lo.n_threads, config.draft_vocab));
        e->drafters_.push_back(std::move(d));
      } else if (kind == "draft") {
        REWIND_ASSIGN_OR_RETURN(auto d, MakeModelDrafter(config.model_draft, *e->model_, lo.n_threads));
        e->info_.draft_device = d->device();
        LOG_INFO("draft model %s on %s", config.model_draft.c_str(), e->info_.draft_device.c_str());
        e->drafters_.push_back(std::move(d));
      }
    }
    if (config.spec_synth_accept >= 0)
      LOG_WARN("--spec-synth-accept %.3f: drafted tokens are accepted at random; the output is NOT the model's "
               "output (benchmarking only)", config.spec_synth_accept);
  }
  for (const auto& d : e->drafters_)
    hc.device_reserved_bytes += static_cast<int64_t>(d->device_bytes(n_ctx, config.n_parallel));
  hc.device_bytes = config.cache_device_mib << 20;
  // A step runs every decoding slot's token (and draft) first, then prompt chunks up to --batch-size.
  hc.forward_out_rows = std::max(1, config.n_parallel) * (e->drafters_.empty() ? 1 : 1 + config.draft_max);
  hc.forward_rows = std::max(config.n_batch, hc.forward_out_rows);
  REWIND_ASSIGN_OR_RETURN(e->cache_, HybridCache::Create(*e->model_, hc));
  if (e->model_->device_name() != "cpu") {
    e->info_.device_memory_total = e->model_->device_memory_total();
    const uint64_t weights_bytes = e->model_->device_weights_bytes();
    e->info_.device_weights_bytes = weights_bytes;
    e->info_.device_kv_bytes = e->model_->device_kv_bytes();
    e->info_.device_state_bytes = e->model_->device_state_bytes();
    LOG_INFO("device %s: weights %.1f MiB, KV pages %.1f MiB (--cache-device), recurrent states %.1f MiB "
             "(device memory); checkpoints in host memory within --cache-ram %.1f MiB",
             e->model_->device_description().c_str(), weights_bytes / 1048576.0,
             e->info_.device_kv_bytes / 1048576.0, e->info_.device_state_bytes / 1048576.0,
             hc.budget_bytes / 1048576.0);
  }
  LogContextMemory(cfg, hc.kv_type, n_ctx, config.n_parallel);
  if (const int32_t fit = e->cache_->MaxSequenceTokens(); fit < n_ctx) {
    // The budget is never exceeded (docs/cache-budget.md): one request cannot grow past what it holds.
    const bool device = e->model_->device_name() != "cpu";  // the pages are the device's pool, not the budget's
    const char* flag = device ? "--cache-device" : "--cache-ram";
    const int64_t mib = device ? static_cast<int64_t>(e->model_->device_kv_bytes() >> 20) : hc.budget_bytes >> 20;
    LOG_WARN("%s %" PRId64 " MiB holds the attention pages of %d tokens: requests are limited to %d "
             "tokens (context %d); raise %s for longer ones", flag, mib, fit, fit, n_ctx, flag);
    if (fit < 2) return Error::InvalidArgument(std::string("the cache budget holds no useful context: raise ") + flag);
    n_ctx = fit;
  }

  e->info_.model_path = config.model_path;
  e->info_.model_name = config.model_alias.empty() ? BaseName(config.model_path) : config.model_alias;
  e->info_.n_ctx = n_ctx;
  e->info_.n_ctx_train = n_ctx_train;
  e->info_.n_vocab = cfg.n_vocab;
  e->info_.device = e->model_->device_description();
  e->info_.n_parallel = config.n_parallel;
  e->info_.eog_tokens = e->eog_;
  e->info_.arch = cfg.arch_name;
  e->info_.n_embd = cfg.n_embd;
  e->info_.images = (cfg.arch == model::Arch::kQwen35 || cfg.arch == model::Arch::kQwen35Moe) && cfg.imrope;
  e->slots_.resize(config.n_parallel);
  e->slot_tokens_.resize(config.n_parallel);
  e->slot_infos_.resize(config.n_parallel);
  for (int32_t i = 0; i < config.n_parallel; ++i) e->slot_infos_[i] = {i, false, n_ctx, 0, 0};
  e->thread_ = std::thread([raw = e.get()] { raw->Loop(); });
  LOG_INFO("engine: %s, ctx %d, %d slots, %d threads, %s kernels, kv %s, cache %s (budget %" PRId64
           " MiB, disk %s)",
           e->info_.model_name.c_str(), n_ctx, config.n_parallel, lo.n_threads, CpuLevelName(),
           kernels::KvTypesName(hc.kv_type).c_str(), config.cache ? "on" : "off", hc.budget_bytes >> 20,
           hc.disk_dir.empty() ? "off" : hc.disk_dir.c_str());
  return e;
}

EngineImpl::~EngineImpl() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  RunTasks();  // queued before the stop: their callers are waiting
  if (cache_) {
    Status s = cache_->Persist();
    if (!s.ok()) LOG_WARN("cache persist at shutdown failed: %s", s.error().ToString().c_str());
  }
}

}  // namespace rw::engine
