// The engine's administrative side, run on the engine thread for the server's non-generation endpoints:
// llama-server slot files (save / restore / erase) and introspection (Prometheus metrics, GET /cache).
#include <cinttypes>
#include <filesystem>
#include <sstream>

#include "base/file.h"
#include "base/log.h"
#include "base/prometheus.h"
#include "base/timer.h"
#include "engine/engine_impl.h"

namespace rw::engine {

namespace {

Expected<std::string> SlotFilePath(const EngineConfig& config, const std::string& filename) {
  std::string dir = !config.slot_save_path.empty() ? config.slot_save_path : config.cache_dir;
  if (dir.empty())
    return Error::Unsupported("slot files need a directory: start the server with --slot-save-path DIR or --cache-dir DIR");
  if (filename.empty() || filename.find('/') != std::string::npos || filename.find("..") != std::string::npos ||
      filename[0] == '.')
    return Error::InvalidArgument("invalid slot file name '" + filename + "' (a plain file name is required)");
  REWIND_RETURN_IF_ERROR(MakeDirs(dir));
  return dir + "/" + filename;
}

}  // namespace

Expected<Engine::SlotFileResult> EngineImpl::SaveSlot(int32_t slot, const std::string& filename) {
  if (slot < 0 || slot >= info_.n_parallel) return Error::InvalidArgument("slot id out of range");
  REWIND_ASSIGN_OR_RETURN(std::string path, SlotFilePath(config_, filename));
  Expected<SlotFileResult> result = Error::Internal("not run");
  RunOnEngine([&] {
    double t0 = NowSeconds();
    if (slots_[slot]) {
      result = Error::Unavailable("slot " + std::to_string(slot) + " is busy");
      return;
    }
    const std::vector<int32_t>& tokens = slot_tokens_[slot];
    if (tokens.empty()) {
      result = Error::InvalidArgument("slot " + std::to_string(slot) + " holds no tokens");
      return;
    }
    // Re-acquire the slot's last sequence from the prefix tree (its final state was checkpointed at release):
    // a probe prompt that extends it by one token resumes exactly at its end.
    std::vector<int32_t> probe = tokens;
    probe.push_back(tokens.back());
    auto acq = cache_->Acquire(probe, {}, true);
    if (!acq.ok()) {
      result = acq.error();
      return;
    }
    memory::SeqId seq = acq->seq;
    int32_t pos = acq->resume_pos;
    while (pos < static_cast<int32_t>(tokens.size())) {  // evicted meanwhile: rebuild what is missing
      int32_t n = cache_->MaxChunk(seq, std::min<int32_t>(config_.n_batch, tokens.size() - pos));
      EvalItem item{seq, std::span<const int32_t>(tokens.data() + pos, n), false};
      model::ForwardOutput out;
      Status st = cache_->Evaluate({&item, 1}, &out);
      if (!st.ok()) {
        cache_->Release(seq, false);
        result = st.error();
        return;
      }
      pos += n;
    }
    auto bytes = cache_->SaveSequence(seq, path);
    cache_->Release(seq, true);
    if (!bytes.ok()) {
      result = bytes.error();
      return;
    }
    result = SlotFileResult{static_cast<int32_t>(tokens.size()), *bytes, (NowSeconds() - t0) * 1e3};
  });
  return result;
}

Expected<Engine::SlotFileResult> EngineImpl::RestoreSlot(int32_t slot, const std::string& filename) {
  if (slot < 0 || slot >= info_.n_parallel) return Error::InvalidArgument("slot id out of range");
  REWIND_ASSIGN_OR_RETURN(std::string path, SlotFilePath(config_, filename));
  if (!FileExists(path)) return Error::NotFound("no slot file '" + filename + "'");
  Expected<SlotFileResult> result = Error::Internal("not run");
  RunOnEngine([&] {
    double t0 = NowSeconds();
    if (slots_[slot]) {
      result = Error::Unavailable("slot " + std::to_string(slot) + " is busy");
      return;
    }
    // The saved sequence (tokens, recurrent state, KV) goes into the prefix tree: the next request sharing its
    // prefix resumes there exactly, on any slot.
    auto n = cache_->LoadIntoTree(path);
    if (!n.ok()) {
      result = n.error();
      return;
    }
    std::error_code ec;
    const uint64_t size = std::filesystem::file_size(path, ec);
    if (ec) {
      result = Error::Io("cannot stat '" + path + "': " + ec.message());
      return;
    }
    slot_tokens_[slot].clear();
    result = SlotFileResult{*n, size, (NowSeconds() - t0) * 1e3};
  });
  return result;
}

Status EngineImpl::EraseSlot(int32_t slot) {
  if (slot < 0 || slot >= info_.n_parallel) return Error::InvalidArgument("slot id out of range");
  Status result;
  RunOnEngine([&] {
    if (slots_[slot]) {
      result = Error::Unavailable("slot " + std::to_string(slot) + " is busy");
      return;
    }
    slot_tokens_[slot].clear();
  });
  return result;
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
  counter("rewind_admission_waits_total",
          "Requests that waited for running requests to finish because the cache budget held their memory.",
          c.admission_waits);
  counter("rewind_batches_total", "Forward batches run.", c.batches);
  counter("rewind_batch_tokens_total", "Tokens evaluated in forward batches.", c.batch_tokens);
  counter("rewind_batches_top_k_total",
          "Forward batches whose rows were sampled from each row's best K logits (no full-row download).",
          c.batches_top_k);
  os << "# HELP rewind_prompt_seconds_total Time spent evaluating prompts.\n# TYPE rewind_prompt_seconds_total counter\n"
     << "rewind_prompt_seconds_total " << c.prompt_seconds << "\n";
  os << "# HELP rewind_decode_seconds_total Time spent in decode steps.\n# TYPE rewind_decode_seconds_total counter\n"
     << "rewind_decode_seconds_total " << c.decode_seconds << "\n";
  counter("rewind_spec_rounds_total", "Speculative verify rounds.", c.spec_rounds);
  counter("rewind_spec_drafted_total", "Drafted tokens.", c.spec_drafted);
  counter("rewind_spec_accepted_total", "Drafted tokens accepted.", c.spec_accepted);
  counter("rewind_spec_rollbacks_total", "Rollbacks of rejected draft tails (replay log).", c.spec_rollbacks);
  os << "# HELP rewind_spec_rollback_seconds_total Time spent rolling back rejected drafts.\n"
        "# TYPE rewind_spec_rollback_seconds_total counter\nrewind_spec_rollback_seconds_total "
     << c.rollback_seconds << "\n";
  os << "# HELP rewind_spec_draft_seconds_total Time spent in the drafters (drafting and observing verified "
        "batches).\n# TYPE rewind_spec_draft_seconds_total counter\nrewind_spec_draft_seconds_total "
     << c.spec_draft_seconds << "\n";
  os << "# HELP rewind_spec_verify_seconds_total Forward time of decode steps that verified a draft (part of "
        "rewind_decode_seconds_total).\n# TYPE rewind_spec_verify_seconds_total counter\n"
        "rewind_spec_verify_seconds_total "
     << c.spec_verify_seconds << "\n";
  os << "# HELP rewind_spec_drafted_at_total Drafted tokens by draft position (1-based).\n"
        "# TYPE rewind_spec_drafted_at_total counter\n";
  for (size_t i = 0; i < c.spec_drafted_at.size(); ++i)
    if (c.spec_drafted_at[i]) os << "rewind_spec_drafted_at_total{position=\"" << i + 1 << "\"} " << c.spec_drafted_at[i] << "\n";
  os << "# HELP rewind_spec_accepted_at_total Accepted draft tokens by draft position (1-based).\n"
        "# TYPE rewind_spec_accepted_at_total counter\n";
  for (size_t i = 0; i < c.spec_accepted_at.size(); ++i)
    if (c.spec_drafted_at[i]) os << "rewind_spec_accepted_at_total{position=\"" << i + 1 << "\"} " << c.spec_accepted_at[i] << "\n";
  std::string cache_text, dev_name, dev_type, dev_desc;
  uint64_t dev_used = 0, dev_total = 0, dev_kv = 0, dev_states = 0;
  RunOnEngine([&] {
    cache_text = cache_->MetricsText();
    dev_name = model_->device_name();
    dev_type = model_->device_type();
    dev_desc = model_->device_description();
    dev_used = model_->device_bytes();
    dev_total = model_->device_memory_total();
    dev_kv = model_->device_kv_bytes();
    dev_states = model_->device_state_bytes();
  });
  // The device the forward runs on (as GET /props names it); its memory on a GPU.
  os << "# HELP rewind_device_info The device the forward runs on (cpu or vulkanN), its kind and description.\n"
        "# TYPE rewind_device_info gauge\nrewind_device_info{name=\"" << PromLabelValue(dev_name) << "\",type=\""
     << PromLabelValue(dev_type) << "\",description=\"" << PromLabelValue(dev_desc) << "\"} 1\n";
  if (dev_name != "cpu") {
    os << "# HELP rewind_device_memory_used_bytes Device memory this server holds (weights, KV pages, recurrent "
          "states, scratch).\n# TYPE rewind_device_memory_used_bytes gauge\nrewind_device_memory_used_bytes "
       << dev_used << "\n";
    os << "# HELP rewind_device_memory_total_bytes The device's memory (its largest device-local heap).\n"
          "# TYPE rewind_device_memory_total_bytes gauge\nrewind_device_memory_total_bytes " << dev_total << "\n";
    os << "# HELP rewind_device_kv_bytes Device memory of the KV page pool (checkpoints are host memory: "
          "rewind_cache_checkpoint_bytes).\n# TYPE rewind_device_kv_bytes gauge\nrewind_device_kv_bytes "
       << dev_kv << "\n";
    os << "# HELP rewind_device_state_bytes Device memory of the live recurrent-state slots.\n"
          "# TYPE rewind_device_state_bytes gauge\nrewind_device_state_bytes " << dev_states << "\n";
  }
  os << cache_text;
  return os.str();
}

std::string EngineImpl::CacheJson() {
  std::string out;
  RunOnEngine([&] { out = cache_->StatsJson(); });
  return out;
}

std::string EngineImpl::CacheTreeJson() {
  // The engine thread only copies a bounded snapshot; the JSON is built here, on the caller's thread.
  std::shared_ptr<const HybridCache::TreeView> view;
  RunOnEngine([&] { view = cache_->TreeSnapshot(/*max_nodes=*/2000, /*max_new_hashes=*/32); });
  if (!view) return R"({"nodes":[],"sequences":[],"disk_only":[]})";  // stopping
  return cache_->TreeViewJson(*view);
}

}  // namespace rw::engine
