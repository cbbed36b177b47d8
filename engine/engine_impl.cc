#include "engine/engine_impl.h"

#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <future>
#include <sstream>
#include <thread>

#include "base/file.h"
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

Expected<std::unique_ptr<EngineImpl>> EngineImpl::Create(const EngineConfig& config) {
  REWIND_RETURN_IF_ERROR(config.Validate());
  std::unique_ptr<EngineImpl> e(new EngineImpl(config));
  model::LoadOptions lo;
  lo.n_threads = config.n_threads > 0 ? config.n_threads
                                       : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  REWIND_ASSIGN_OR_RETURN(e->model_, model::Model::Load(config.model_path, lo));
  const auto& cfg = e->model_->config();
  REWIND_ASSIGN_OR_RETURN(auto tok, tokenizer::Tokenizer::FromGguf(e->model_->file()));
  e->eog_ = tok->eog_ids();

  int32_t n_ctx_train = cfg.n_ctx_train;
  int32_t n_ctx = config.n_ctx > 0 ? config.n_ctx : std::min<int32_t>(n_ctx_train > 0 ? n_ctx_train : 4096, 65536);
  if (n_ctx_train > 0 && n_ctx > n_ctx_train)
    LOG_WARN("context %d exceeds the model's training context %d (not capped; quality may suffer)", n_ctx,
             n_ctx_train);

  HybridCacheConfig hc;
  hc.kv_type = config.kv_type == "f32" ? model::KvType::kF32 : model::KvType::kF16;
  hc.n_seq_max = config.n_parallel;
  hc.n_ctx = n_ctx;
  hc.checkpoint_every = config.checkpoint_every;
  hc.use_cache = config.cache;
  hc.disk_dir = config.cache_dir;
  hc.disk_bytes = config.cache_disk_mib << 20;
  if (config.cache_ram_mib > 0) {
    hc.budget_bytes = config.cache_ram_mib << 20;
  } else {
    // Default: half of the available memory, at most 8 GiB, at least what the live sequences need to reach
    // a quarter of their context.
    int64_t avail = AvailableMemoryBytes();
    hc.budget_bytes = std::min<int64_t>(avail / 2, int64_t{8} << 30);
  }
  REWIND_ASSIGN_OR_RETURN(e->cache_, HybridCache::Create(*e->model_, hc));

  e->info_.model_path = config.model_path;
  e->info_.model_name = config.model_alias.empty() ? BaseName(config.model_path) : config.model_alias;
  e->info_.n_ctx = n_ctx;
  e->info_.n_ctx_train = n_ctx_train;
  e->info_.n_vocab = cfg.n_vocab;
  e->info_.n_parallel = config.n_parallel;
  e->info_.eog_tokens = e->eog_;
  e->slots_.resize(config.n_parallel);
  e->slot_infos_.resize(config.n_parallel);
  for (int32_t i = 0; i < config.n_parallel; ++i) e->slot_infos_[i] = {i, false, n_ctx, 0, 0};
  e->thread_ = std::thread([raw = e.get()] { raw->Loop(); });
  LOG_INFO("engine: %s, ctx %d, %d slots, %d threads, kv %s, cache %s (budget %" PRId64 " MiB)",
           e->info_.model_name.c_str(), n_ctx, config.n_parallel, lo.n_threads, config.kv_type.c_str(),
           config.cache ? "on" : "off", hc.budget_bytes >> 20);
  return e;
}

EngineImpl::~EngineImpl() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (cache_) {
    Status s = cache_->Persist();
    if (!s.ok()) LOG_WARN("cache persist at shutdown failed: %s", s.error().ToString().c_str());
  }
}

Status EngineImpl::ValidateRequest(const GenerationRequest& r) const {
  if (r.prompt.empty()) return Error::InvalidArgument("the prompt is empty");
  if (static_cast<int32_t>(r.prompt.size()) >= info_.n_ctx)
    return Error::OutOfRange("the prompt has " + std::to_string(r.prompt.size()) +
                             " tokens, the context holds " + std::to_string(info_.n_ctx) +
                             " (one position must remain for generation)");
  for (int32_t t : r.prompt)
    if (t < 0 || t >= info_.n_vocab)
      return Error::InvalidArgument("token id " + std::to_string(t) + " is outside the vocabulary [0, " +
                                    std::to_string(info_.n_vocab) + ")");
  const auto& s = r.sampling;
  if (!(s.temperature >= 0) || !std::isfinite(s.temperature))
    return Error::InvalidArgument("temperature must be >= 0");
  if (!(s.top_p > 0 && s.top_p <= 1)) return Error::InvalidArgument("top_p must be in (0, 1]");
  if (!(s.min_p >= 0 && s.min_p <= 1)) return Error::InvalidArgument("min_p must be in [0, 1]");
  if (s.top_k < 0) return Error::InvalidArgument("top_k must be >= 0");
  if (r.max_tokens < -1) return Error::InvalidArgument("max_tokens must be >= 0");
  if (r.top_logprobs < 0 || r.top_logprobs > 20) return Error::InvalidArgument("top_logprobs must be in [0, 20]");
  if (r.slot_id >= info_.n_parallel) return Error::InvalidArgument("slot id out of range");
  return Status::Ok();
}

Expected<uint64_t> EngineImpl::Submit(GenerationRequest request, std::shared_ptr<RequestSink> sink) {
  REWIND_RETURN_IF_ERROR(ValidateRequest(request));
  uint64_t id = next_id_.fetch_add(1);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return Error::Unavailable("the engine is shutting down");
    queue_.push_back({id, std::move(request), std::move(sink), NowSeconds()});
  }
  cv_.notify_all();
  return id;
}

void EngineImpl::Cancel(uint64_t request_id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancels_.push_back(request_id);
  }
  cv_.notify_all();
}

void EngineImpl::RunOnEngine(std::function<void()> fn) {
  std::promise<void> done;
  auto fut = done.get_future();
  {
    std::lock_guard<std::mutex> lock(mu_);
    tasks_.push_back([&] {
      fn();
      done.set_value();
    });
  }
  cv_.notify_all();
  fut.wait();
}

std::vector<SlotInfo> EngineImpl::Slots() {
  std::lock_guard<std::mutex> lock(stats_mu_);
  return slot_infos_;
}

void EngineImpl::Loop() {
  for (;;) {
    std::vector<uint64_t> cancels;
    {
      std::unique_lock<std::mutex> lock(mu_);
      bool busy = !waiting_.empty() || std::any_of(slots_.begin(), slots_.end(), [](auto& s) { return s != nullptr; });
      if (!busy) cv_.wait(lock, [&] { return stop_ || !queue_.empty() || !cancels_.empty() || !tasks_.empty(); });
      if (stop_) break;
      while (!queue_.empty()) {
        waiting_.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      cancels.swap(cancels_);
    }
    RunTasks();
    for (uint64_t id : cancels) {
      for (size_t i = 0; i < slots_.size(); ++i)
        if (slots_[i] && slots_[i]->id == id) Finish(i, "cancelled");
      for (auto it = waiting_.begin(); it != waiting_.end(); ++it) {
        if (it->id != id) continue;
        Completion c;
        c.finish_reason = "cancelled";
        c.prompt_tokens = static_cast<int32_t>(it->request.prompt.size());
        it->sink->OnDone(c);
        counters_.requests_cancelled++;
        waiting_.erase(it);
        break;
      }
    }
    Admit();
    Step();
    {
      std::lock_guard<std::mutex> lock(stats_mu_);
      published_ = counters_;
      for (size_t i = 0; i < slots_.size(); ++i) {
        slot_infos_[i].busy = slots_[i] != nullptr;
        slot_infos_[i].task_id = slots_[i] ? slots_[i]->id : 0;
        if (slots_[i]) slot_infos_[i].n_tokens = slots_[i]->n_evaluated;
      }
    }
  }
  // Shutdown: cancel everything still here.
  for (size_t i = 0; i < slots_.size(); ++i)
    if (slots_[i]) Finish(i, "cancelled");
  for (auto& p : waiting_) {
    Completion c;
    c.finish_reason = "cancelled";
    p.sink->OnDone(c);
  }
  waiting_.clear();
}

void EngineImpl::RunTasks() {
  for (;;) {
    std::function<void()> task;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (tasks_.empty()) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

void EngineImpl::Admit() {
  while (!waiting_.empty()) {
    Pending& p = waiting_.front();
    // Pick the requested slot, else the first free one.
    int32_t slot = -1;
    if (p.request.slot_id >= 0) {
      if (!slots_[p.request.slot_id]) slot = p.request.slot_id;
    } else {
      for (size_t i = 0; i < slots_.size(); ++i)
        if (!slots_[i]) {
          slot = static_cast<int32_t>(i);
          break;
        }
    }
    if (slot < 0) return;  // all busy: requests queue
    auto acq = cache_->Acquire(p.request.prompt, p.request.checkpoint_hints, p.request.cache_prompt && config_.cache);
    if (!acq.ok()) {
      bool others = std::any_of(slots_.begin(), slots_.end(), [](auto& s) { return s != nullptr; });
      if (acq.error().kind == ErrorKind::kResourceExhausted && others) return;  // retry when memory frees up
      Completion c;
      c.finish_reason = "error";
      c.error = acq.error();
      c.prompt_tokens = static_cast<int32_t>(p.request.prompt.size());
      LOG_WARN("request %" PRIu64 " rejected: %s", p.id, acq.error().ToString().c_str());
      p.sink->OnDone(c);
      counters_.requests_error++;
      waiting_.pop_front();
      continue;
    }
    auto a = std::make_unique<Active>();
    a->id = p.id;
    a->request = std::move(p.request);
    a->sink = std::move(p.sink);
    a->sampler = std::make_unique<Sampler>(a->request.sampling);
    a->seq = acq->seq;
    a->n_evaluated = acq->resume_pos;
    a->report = acq->report;
    a->t_start = NowSeconds();
    slots_[slot] = std::move(a);
    waiting_.pop_front();
  }
}

bool EngineImpl::Step() {
  // Decode steps first (latency), then prefill chunks within the batch budget.
  std::vector<EvalItem> items;
  std::vector<size_t> item_slot;
  std::vector<std::vector<int32_t>> owned;  // token storage for decode items
  owned.reserve(slots_.size());
  int32_t budget = config_.n_batch;
  for (size_t i = 0; i < slots_.size(); ++i) {
    Active* a = slots_[i].get();
    if (!a || a->pending_token < 0) continue;
    owned.push_back({a->pending_token});
    items.push_back({a->seq, owned.back(), false});
    item_slot.push_back(i);
    --budget;
  }
  for (size_t i = 0; i < slots_.size() && budget > 0; ++i) {
    Active* a = slots_[i].get();
    if (!a || a->pending_token >= 0) continue;
    int32_t remaining = static_cast<int32_t>(a->request.prompt.size()) - a->n_evaluated;
    if (remaining <= 0) continue;
    int32_t n = cache_->MaxChunk(a->seq, std::min(remaining, budget));
    std::span<const int32_t> chunk(a->request.prompt.data() + a->n_evaluated, static_cast<size_t>(n));
    items.push_back({a->seq, chunk, false});
    item_slot.push_back(i);
    budget -= n;
  }
  if (items.empty()) return false;

  model::ForwardOutput out;
  double t0 = NowSeconds();
  Status st = cache_->Evaluate(items, &out);
  double dt = NowSeconds() - t0;
  if (!st.ok()) {
    LOG_ERROR("batch failed: %s", st.error().ToString().c_str());
    for (size_t k = 0; k < items.size(); ++k) Finish(item_slot[k], "error", st.error());
    return true;
  }
  counters_.batches++;
  for (const auto& it : items) counters_.batch_tokens += it.tokens.size();

  for (size_t k = 0; k < items.size(); ++k) {
    Active& a = *slots_[item_slot[k]];
    bool was_decode = a.pending_token >= 0;
    a.n_evaluated += static_cast<int32_t>(items[k].tokens.size());
    if (was_decode) {
      a.pending_token = -1;
      counters_.decode_seconds += dt / items.size();
    } else {
      a.prompt_evaluated += static_cast<int32_t>(items[k].tokens.size());
      counters_.prompt_seconds += dt / items.size();
      if (a.n_evaluated < static_cast<int32_t>(a.request.prompt.size())) continue;  // more prompt to go
      a.t_first = NowSeconds();
    }
    Emit(a, out.Row(out.seq_first_row[k]));
  }
  return true;
}

void EngineImpl::Emit(Active& a, std::span<const float> logits) {
  size_t slot = 0;
  while (slots_[slot].get() != &a) ++slot;
  int32_t token = a.sampler->Sample(logits);
  TokenEvent ev;
  ev.token = token;
  if (a.request.logprobs || a.request.top_logprobs > 0) {
    ev.logprob = Sampler::Logprob(logits, token);
    if (a.request.top_logprobs > 0) ev.top = Sampler::TopLogprobs(logits, a.request.top_logprobs);
  }
  bool is_eog = std::find(eog_.begin(), eog_.end(), token) != eog_.end();
  if (is_eog && !a.request.ignore_eos) {
    // End-of-generation tokens are not streamed as text; the request stops.
    Finish(slot, "stop");
    return;
  }
  a.generated.push_back(token);
  bool keep = a.sink->OnToken(ev);
  if (!keep) {
    Finish(slot, "cancelled");
    return;
  }
  if (a.request.max_tokens >= 0 && static_cast<int32_t>(a.generated.size()) >= a.request.max_tokens) {
    Finish(slot, "length");
    return;
  }
  if (a.n_evaluated + 1 >= info_.n_ctx) {
    Finish(slot, "length");
    return;
  }
  a.pending_token = token;
}

void EngineImpl::Finish(size_t slot, const std::string& reason, std::optional<Error> error) {
  std::unique_ptr<Active> a = std::move(slots_[slot]);
  if (!a) return;
  double now = NowSeconds();
  Completion c;
  c.finish_reason = reason;
  c.error = std::move(error);
  c.prompt_tokens = static_cast<int32_t>(a->request.prompt.size());
  c.cached_tokens = a->report.resume_pos;
  c.prompt_evaluated = a->prompt_evaluated;
  c.generated_tokens = static_cast<int32_t>(a->generated.size());
  double first = a->t_first > 0 ? a->t_first : now;
  c.prompt_ms = (first - a->t_start) * 1e3;
  c.predicted_ms = a->t_first > 0 ? (now - a->t_first) * 1e3 : 0;
  c.slot_id = static_cast<int32_t>(slot);
  c.cache = a->report;
  // Keep the evaluated sequence in the cache unless the request failed or opted out.
  cache_->Release(a->seq, reason != "error" && a->request.cache_prompt && config_.cache);

  counters_.requests++;
  if (reason == "error") counters_.requests_error++;
  else if (reason == "cancelled") counters_.requests_cancelled++;
  else counters_.requests_ok++;
  counters_.prompt_tokens += c.prompt_tokens;
  counters_.prompt_evaluated += c.prompt_evaluated;
  counters_.cached_tokens += c.cached_tokens;
  counters_.generated += c.generated_tokens;
  counters_.resume_source[c.cache.source]++;
  if (c.cache.lcp == 0) counters_.miss_no_shared_prefix++;
  else if (c.cache.extra_tokens > 0) counters_.miss_no_exact_state++;
  else counters_.hits_exact++;
  LOG_INFO("request %" PRIu64 " slot %zu: prompt %d (cached %d, evaluated %d, resume %s), generated %d, %s; "
           "prompt %.1f ms, gen %.1f ms%s%s",
           a->id, slot, c.prompt_tokens, c.cached_tokens, c.prompt_evaluated, c.cache.source.c_str(),
           c.generated_tokens, reason.c_str(), c.prompt_ms, c.predicted_ms,
           c.cache.reason.empty() ? "" : "; cache: ", c.cache.reason.c_str());
  a->sink->OnDone(c);
}

Expected<Engine::SlotFileResult> EngineImpl::SaveSlot(int32_t slot, const std::string& filename) {
  (void)slot;
  (void)filename;
  return Error::Unsupported("slot save is not implemented yet");
}

Expected<Engine::SlotFileResult> EngineImpl::RestoreSlot(int32_t slot, const std::string& filename) {
  (void)slot;
  (void)filename;
  return Error::Unsupported("slot restore is not implemented yet");
}

Status EngineImpl::EraseSlot(int32_t slot) {
  if (slot < 0 || slot >= info_.n_parallel) return Error::InvalidArgument("slot id out of range");
  return Status::Ok();
}

std::string EngineImpl::MetricsText() {
  Counters c;
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    c = published_;
  }
  std::ostringstream os;
  auto counter = [&](const char* name, const char* help, uint64_t v) {
    os << "# HELP " << name << " " << help << "\n# TYPE " << name << " counter\n" << name << " " << v << "\n";
  };
  counter("rewind_requests_total", "Finished requests.", c.requests);
  counter("rewind_requests_cancelled_total", "Requests cancelled (client gone or stop string).", c.requests_cancelled);
  counter("rewind_requests_error_total", "Requests that failed.", c.requests_error);
  counter("rewind_prompt_tokens_total", "Prompt tokens received.", c.prompt_tokens);
  counter("rewind_prompt_tokens_evaluated_total", "Prompt tokens evaluated by the model.", c.prompt_evaluated);
  counter("rewind_prompt_tokens_cached_total", "Prompt tokens reused from the cache.", c.cached_tokens);
  counter("rewind_generated_tokens_total", "Generated tokens.", c.generated);
  counter("rewind_cache_miss_no_shared_prefix_total", "Requests that shared no prefix with anything cached.",
          c.miss_no_shared_prefix);
  counter("rewind_cache_miss_no_exact_state_total",
          "Requests with a shared prefix but no exact recurrent state at its end (processed beyond the minimum).",
          c.miss_no_exact_state);
  counter("rewind_cache_hit_exact_total", "Requests that resumed exactly at the longest common prefix.", c.hits_exact);
  os << "# HELP rewind_resume_source_total Requests by the state they resumed from.\n"
        "# TYPE rewind_resume_source_total counter\n";
  for (const auto& [src, n] : c.resume_source) os << "rewind_resume_source_total{source=\"" << src << "\"} " << n << "\n";
  counter("rewind_batches_total", "Forward batches run.", c.batches);
  counter("rewind_batch_tokens_total", "Tokens evaluated in forward batches.", c.batch_tokens);
  os << "# HELP rewind_prompt_seconds_total Time spent evaluating prompts.\n# TYPE rewind_prompt_seconds_total counter\n"
     << "rewind_prompt_seconds_total " << c.prompt_seconds << "\n";
  os << "# HELP rewind_decode_seconds_total Time spent in decode steps.\n# TYPE rewind_decode_seconds_total counter\n"
     << "rewind_decode_seconds_total " << c.decode_seconds << "\n";
  std::string cache_text;
  RunOnEngine([&] { cache_text = cache_->MetricsText(); });
  os << cache_text;
  return os.str();
}

std::string EngineImpl::CacheJson() {
  std::string out;
  RunOnEngine([&] { out = cache_->StatsJson(); });
  return out;
}

}  // namespace rw::engine
