// The engine's scheduler: requests in, admission into slots, one step of continuous batching (prefill chunks
// and decode rows in one forward), emitting tokens, finishing. Construction is engine_create.cc, speculative
// decoding engine_speculate.cc.
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
#include "base/check.h"
#include "base/cpu_features.h"
#include "base/file.h"
#include "base/hex.h"
#include "base/log.h"
#include "base/timer.h"
#include "tokenizer/tokenizer.h"

namespace rw::engine {
namespace {

// Prompt tokens per step while other requests decode: at least this many, else --batch-size / 4.
constexpr int32_t kMinPrefillWhileDecoding = 32;

}  // namespace

Status EngineImpl::ValidateRequest(const GenerationRequest& r) const {
  if (r.prompt.empty()) return Error::InvalidArgument("the prompt is empty");
  if (static_cast<int32_t>(r.prompt.size()) >= info_.n_ctx)
    return Error::OutOfRange("the prompt has " + std::to_string(r.prompt.size()) +
                             " tokens, the context holds " + std::to_string(info_.n_ctx) +
                             " (one position must remain for generation)");
  REWIND_RETURN_IF_ERROR(ValidatePromptImages(r, info_));
  const auto& s = r.sampling;
  if (!(s.temperature >= 0) || !std::isfinite(s.temperature))
    return Error::InvalidArgument("temperature must be >= 0");
  if (!(s.top_p > 0 && s.top_p <= 1)) return Error::InvalidArgument("top_p must be in (0, 1]");
  if (!(s.min_p >= 0 && s.min_p <= 1)) return Error::InvalidArgument("min_p must be in [0, 1]");
  if (s.top_k < 0) return Error::InvalidArgument("top_k must be >= 0");
  if (s.mirostat < 0 || s.mirostat > 2) return Error::InvalidArgument("mirostat must be 0, 1 or 2");
  if (!(s.repeat_penalty > 0) || !std::isfinite(s.repeat_penalty))
    return Error::InvalidArgument("repeat_penalty must be > 0");
  if (r.max_tokens < -1) return Error::InvalidArgument("max_tokens must be >= 0");
  if (r.top_logprobs < 0 || r.top_logprobs > 20) return Error::InvalidArgument("top_logprobs must be in [0, 20]");
  if (r.slot_id >= info_.n_parallel) return Error::InvalidArgument("slot id out of range");
  return Status::Ok();
}

Expected<uint64_t> EngineImpl::Submit(GenerationRequest request, std::shared_ptr<RequestSink> sink) {
  REWIND_RETURN_IF_ERROR(ValidateRequest(request));
  if (!request.images.empty()) AddImageCheckpointHints(request);
  // Work that grows with the request happens here, on the caller's thread: the engine thread then only runs
  // prepared, bounded work per step.
  std::shared_ptr<const grammar::Grammar> grammar = std::move(request.compiled_grammar);
  if (!grammar && !request.sampling.grammar.empty()) {
    REWIND_ASSIGN_OR_RETURN(grammar, grammar::ParseGbnf(request.sampling.grammar));
  }
  if (grammar) std::call_once(trie_once_, [&] { vocab_.BuildTrie(); });  // ~1 s at 150K tokens, once
  std::shared_ptr<const DryBreakers> dry = PrepareDry(request.sampling, &vocab_);
  uint64_t id = next_id_.fetch_add(1);
  const double submitted = NowSeconds();
  // The disk tier's file reads and the remote tier's network round trips happen here, on the request's own
  // thread, never on the engine's: a read never stalls the running streams (docs/cache-budget.md). The disk
  // tier asks the engine thread how much RAM serves (a task between two steps) only when its index holds a state
  // on the prompt's path. A request submitted from the engine thread itself skips the disk tier.
  std::shared_ptr<const DiskFetch> disk;
  const bool use_cache = request.cache_prompt && config_.cache;
  if (use_cache && cache_->has_disk() && std::this_thread::get_id() != thread_.get_id())
    disk = cache_->FetchDisk(request.prompt, [&] {
      int32_t ram = std::numeric_limits<int32_t>::max();  // engine stopping: read nothing
      RunOnEngine([&] { ram = cache_->RamResume(request.prompt); });
      return ram;
    });
  std::shared_ptr<const remote::RemoteFetch> fetched;
  if (use_cache && cache_->has_remote())
    fetched = cache_->FetchRemote(request.prompt, request.checkpoint_hints, request.generation_start);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return Error::Unavailable("the engine is shutting down");
    queue_.push_back({id, std::move(request), std::move(sink), submitted, false, std::move(grammar), std::move(dry),
                      std::move(fetched), std::move(disk)});
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

bool EngineImpl::RunOnEngine(std::function<void()> fn) {
  std::promise<void> done;
  auto fut = done.get_future();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return false;
    tasks_.push_back([&] {
      fn();
      done.set_value();
    });
  }
  cv_.notify_all();
  fut.wait();
  return true;
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
        slot_infos_[i].n_tokens = slots_[i] ? slots_[i]->n_evaluated : static_cast<int32_t>(slot_tokens_[i].size());
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
  // First come, first served, except that a request pinned to a busy slot (id_slot) waits for that slot without
  // holding back the requests behind it.
  for (size_t at = 0; at < waiting_.size();) {
    Pending& p = waiting_[at];
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
    if (slot < 0) {
      if (p.request.slot_id >= 0) {
        ++at;  // its slot is busy: the next request may take another
        continue;
      }
      return;  // all busy: requests queue
    }
    // Admission control: the sequence's pages up to the longest it may grow (prompt + max_tokens, else the
    // context) are reserved in the budget; while the running requests' reservations leave too little room,
    // the request waits (first come, first served) for one of them to finish.
    const int64_t prompt_n = static_cast<int64_t>(p.request.prompt.size());
    const int32_t reserve = static_cast<int32_t>(
        p.request.max_tokens >= 0 ? std::min<int64_t>(info_.n_ctx, prompt_n + std::max(1, p.request.max_tokens))
                                  : info_.n_ctx);
    auto acq = cache_->Acquire(p.request.prompt, p.request.checkpoint_hints, p.request.cache_prompt && config_.cache,
                               reserve, p.remote.get(), p.disk.get());
    if (!acq.ok()) {
      bool others = std::any_of(slots_.begin(), slots_.end(), [](auto& s) { return s != nullptr; });
      if (acq.error().kind == ErrorKind::kResourceExhausted && others) {
        if (!p.waited_for_memory) counters_.admission_waits++;
        p.waited_for_memory = true;
        return;  // retry when a running request ends
      }
      Completion c;
      c.finish_reason = "error";
      c.error = acq.error();
      c.prompt_tokens = static_cast<int32_t>(p.request.prompt.size());
      LOG_WARN("request %" PRIu64 " rejected: %s", p.id, acq.error().ToString().c_str());
      p.sink->OnDone(c);
      counters_.requests_error++;
      waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(at));
      continue;
    }
    auto a = std::make_unique<Active>();
    a->id = p.id;
    a->request = std::move(p.request);
    a->sink = std::move(p.sink);
    a->sampler = std::make_unique<Sampler>(a->request.sampling, &vocab_, info_.n_ctx, std::move(p.grammar),
                                           std::move(p.dry));
    if (a->request.images.empty()) {
      a->sampler->AcceptPrompt(a->request.prompt);
    } else {
      a->sampler->AcceptPrompt(TextTokens(a->request.prompt, info_.n_vocab));  // image rows are not tokens
      a->images = MakeSeqImages(a->request.images);
    }
    a->seq = acq->seq;
    a->n_evaluated = acq->resume_pos;
    a->report = acq->report;
    a->t_start = NowSeconds();
    a->draft_len = 1;  // slow start: +2 per fully accepted round up to --draft-max, so a first probe is cheap
    if (a->request.images.empty())  // drafters see token ids only: requests with images are not drafted
      for (auto& d : drafters_) d->Begin(slot, a->request.prompt);
    slots_[slot] = std::move(a);
    waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(at));
  }
}

bool EngineImpl::Step() {
  const double t_step = NowSeconds();
  std::vector<DecodeCost> costs;  // decode items of this step, for UpdateDraftCost
  // Decode steps first (latency), then prefill chunks within the batch budget.
  std::vector<EvalItem> items;
  std::vector<size_t> item_slot;
  std::deque<std::vector<int32_t>> owned;  // token storage for decode items (stable addresses)
  int32_t budget = config_.n_batch;
  for (size_t i = 0; i < slots_.size(); ++i) {
    Active* a = slots_[i].get();
    if (!a || a->pending_token < 0) continue;
    std::vector<int32_t> toks = {a->pending_token};
    int32_t n_draft = a->request.images.empty() ? PlanDraft(*a) : 0;
    if (n_draft > 0) {
      // Only the tokens generated since the last draft are appended: no O(position) copy per step.
      std::vector<int32_t>& context = a->draft_context;
      if (context.empty()) context = a->request.prompt;
      context.insert(context.end(), a->generated.begin() + (context.size() - a->request.prompt.size()),
                     a->generated.end());
      std::vector<int32_t> draft;
      const double t_draft = NowSeconds();
      for (auto& d : drafters_) {
        draft = d->Draft(static_cast<int32_t>(i), context, n_draft);
        if (!draft.empty()) break;
      }
      counters_.spec_draft_seconds += NowSeconds() - t_draft;
      if (config_.spec_synth_accept >= 0)  // benchmark: always draft the planned length
        while (static_cast<int32_t>(draft.size()) < n_draft) draft.push_back(context.back());
      if (static_cast<int32_t>(draft.size()) > n_draft) draft.resize(n_draft);
      if (static_cast<int32_t>(draft.size()) >= std::max(1, config_.draft_min))
        toks.insert(toks.end(), draft.begin(), draft.end());
    }
    if (!drafters_.empty()) costs.push_back({i, a->id, a->generated.size(), toks.size() > 1});
    owned.push_back(std::move(toks));
    items.push_back({a->seq, owned.back(), owned.back().size() > 1, false, a->images.empty() ? nullptr : &a->images});
    item_slot.push_back(i);
    budget -= static_cast<int32_t>(owned.back().size());
  }
  // While streams are decoding, a step carries at most kPrefillWhileDecoding prompt tokens: a long prompt is
  // prefilled in small chunks between their tokens instead of freezing them for a whole --batch-size forward.
  if (!items.empty()) budget = std::min(budget, std::max(kMinPrefillWhileDecoding, config_.n_batch / 4));
  for (size_t i = 0; i < slots_.size() && budget > 0; ++i) {
    Active* a = slots_[i].get();
    if (!a || a->pending_token >= 0) continue;
    int32_t remaining = static_cast<int32_t>(a->request.prompt.size()) - a->n_evaluated;
    if (remaining <= 0) continue;
    int32_t n = cache_->MaxChunk(a->seq, std::min(remaining, budget));
    std::span<const int32_t> chunk(a->request.prompt.data() + a->n_evaluated, static_cast<size_t>(n));
    // Only the chunk that ends the prompt needs logits (for its first token).
    items.push_back({a->seq, chunk, false, /*no_logits=*/n < remaining, a->images.empty() ? nullptr : &a->images});
    item_slot.push_back(i);
    budget -= n;
  }
  if (items.empty()) return false;

  model::ForwardOutput out;
  double t0 = NowSeconds();
  bool want_hidden = std::any_of(drafters_.begin(), drafters_.end(), [](auto& d) { return d->wants_hidden(); });
  std::vector<int32_t> pos0(items.size());
  for (size_t k = 0; k < items.size(); ++k) pos0[k] = slots_[item_slot[k]]->n_evaluated;
  const int32_t top_k = BatchTopK(items, item_slot);
  Status st = cache_->Evaluate(items, &out, want_hidden, top_k);
  double dt = NowSeconds() - t0;
  if (!st.ok()) {
    LOG_ERROR("batch failed: %s", st.error().ToString().c_str());
    for (size_t k = 0; k < items.size(); ++k) Finish(item_slot[k], "error", st.error());
    return true;
  }
  counters_.batches++;
  if (top_k > 0) counters_.batches_top_k++;
  for (const auto& it : items) counters_.batch_tokens += it.tokens.size();
  if (!drafters_.empty()) {
    const double t_observe = NowSeconds();
    size_t row = 0;
    for (size_t k = 0; k < items.size(); ++k) {
      std::span<const float> hidden;
      if (want_hidden && !out.hidden_all.empty())
        hidden = std::span<const float>(out.hidden_all.data() + row * out.n_embd, items[k].tokens.size() * out.n_embd);
      if (items[k].images == nullptr)
        for (auto& d : drafters_) d->Observe(static_cast<int32_t>(item_slot[k]), pos0[k], items[k].tokens, hidden);
      row += items[k].tokens.size();
    }
    counters_.spec_draft_seconds += NowSeconds() - t_observe;
  }

  for (size_t k = 0; k < items.size(); ++k) {
    Active& a = *slots_[item_slot[k]];
    bool was_decode = a.pending_token >= 0;
    a.n_evaluated += static_cast<int32_t>(items[k].tokens.size());
    if (was_decode) {
      a.pending_token = -1;
      counters_.decode_seconds += dt / items.size();
      if (items[k].tokens.size() > 1) {
        counters_.spec_verify_seconds += dt / items.size();
        VerifyDraft(item_slot[k], out, out.seq_first_row[k], pos0[k], items[k].tokens);
        continue;
      }
    } else {
      a.prompt_evaluated += static_cast<int32_t>(items[k].tokens.size());
      counters_.prompt_seconds += dt / items.size();
      const auto prompt_size = static_cast<double>(a.request.prompt.size());
      if (a.n_evaluated < static_cast<int32_t>(a.request.prompt.size())) {  // more prompt to go
        if (!a.prefill) {
          a.prefill =
              std::make_unique<Progress>("prefill of request " + std::to_string(a.id), prompt_size, "tokens",
                                         a.n_evaluated - a.prompt_evaluated, 3.0, 3.0, a.t_start);
        }
        a.prefill->Update(a.n_evaluated);
        continue;
      }
      if (a.prefill) a.prefill->Finish(prompt_size);
      a.t_first = NowSeconds();
    }
    Emit(a, RowOf(out, out.seq_first_row[k]));
  }
  UpdateDraftCost(costs, NowSeconds() - t_step);
  return true;
}

// Every row of the batch is sampled by its request's sampler, and logprobs read the full row: the pairs do
// only where each of those samplers is satisfied by its best K (the largest K of the batch serves all; a
// verify item's rows share one sampler, whose need does not change between them).
int32_t EngineImpl::BatchTopK(std::span<const EvalItem> items, std::span<const size_t> item_slot) const {
  if (!config_.sample_top_k) return 0;
  int32_t k = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i].no_logits) continue;
    const Active& a = *slots_[item_slot[i]];
    if (a.request.logprobs || a.request.top_logprobs > 0) return 0;
    const int32_t need = a.sampler->CandidatesNeeded();
    if (need == 0) return 0;
    k = std::max(k, need);
  }
  return k;
}

void EngineImpl::Emit(Active& a, const SampleRow& row) {
  size_t slot = 0;
  while (slots_[slot].get() != &a) ++slot;
  int32_t token = a.sampler->Sample(row);
  if (EmitToken(slot, a, token, row)) a.pending_token = token;
}

bool EngineImpl::EmitToken(size_t slot, Active& a, int32_t token, const SampleRow& row) {
  a.sampler->Accept(token);
  TokenEvent ev;
  ev.token = token;
  if (a.request.logprobs || a.request.top_logprobs > 0) {
    REWIND_CHECK_MSG(row.full(), "logprobs of request %" PRIu64 " need the full logits row", a.id);
    ev.logprob = Sampler::Logprob(row.logits, token);
    if (a.request.top_logprobs > 0) ev.top = Sampler::TopLogprobs(row.logits, a.request.top_logprobs);
  }
  bool is_eog = std::find(eog_.begin(), eog_.end(), token) != eog_.end();
  if (is_eog && !a.request.ignore_eos) {
    // End-of-generation tokens are not streamed as text; the request stops.
    Finish(slot, "stop");
    return false;
  }
  a.generated.push_back(token);
  if (!a.sink->OnToken(ev)) {
    Finish(slot, "cancelled");
    return false;
  }
  if (a.request.max_tokens >= 0 && static_cast<int32_t>(a.generated.size()) >= a.request.max_tokens) {
    Finish(slot, "length");
    return false;
  }
  if (a.n_evaluated + 1 >= info_.n_ctx) {
    Finish(slot, "length");
    return false;
  }
  return true;
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
  c.drafted = a->drafted;
  c.accepted = a->accepted;
  for (auto& d : drafters_) d->End(static_cast<int32_t>(slot));
  // Keep the evaluated sequence in the cache unless the request failed or opted out.
  bool keep = reason != "error" && a->request.cache_prompt && config_.cache;
  const std::span<const int32_t> prompt(a->request.prompt);
  const int32_t branch = a->request.generation_start;
  c.persist = cache_->Release(a->seq, keep,
                              branch > 0 && branch < static_cast<int32_t>(prompt.size())
                                  ? prompt.first(static_cast<size_t>(branch))
                                  : std::span<const int32_t>{});
  slot_tokens_[slot].clear();
  if (keep) {
    std::vector<int32_t>& held = slot_tokens_[slot];
    held = a->request.prompt;
    held.insert(held.end(), a->generated.begin(), a->generated.end());
    held.resize(std::min<size_t>(held.size(), static_cast<size_t>(a->n_evaluated)));
  }

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
  // Release queued the request's new checkpoints for the disk tier's writer thread: nothing here waits for the
  // disk. The server waits on c.persist (its HTTP thread) before the response's last event, so that a crash right
  // after an answer loses nothing of it (docs/checkpoints.md).
  a->sink->OnDone(c);
}

}  // namespace rw::engine
