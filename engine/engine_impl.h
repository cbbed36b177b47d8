// The engine actor: one thread owns the model, the hybrid cache and every sequence. Requests come in through a
// locked queue; each loop iteration admits waiting requests, builds one batch mixing prefill chunks and decode
// steps of all active sequences (continuous batching), runs it, samples, streams, and retires finished requests.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "base/progress.h"
#include "engine/engine.h"
#include "engine/engine_config.h"
#include "engine/drafter.h"
#include "engine/hybrid_cache.h"
#include "engine/sampler.h"
#include "model/forward.h"

namespace rw::engine {

class EngineImpl final : public Engine {
 public:
  static Expected<std::unique_ptr<EngineImpl>> Create(const EngineConfig& config);
  ~EngineImpl() override;

  Expected<uint64_t> Submit(GenerationRequest request, std::shared_ptr<RequestSink> sink) override;
  void Cancel(uint64_t request_id) override;
  EngineInfo Info() const override { return info_; }
  std::vector<SlotInfo> Slots() override;
  Expected<SlotFileResult> SaveSlot(int32_t slot, const std::string& filename) override;
  Expected<SlotFileResult> RestoreSlot(int32_t slot, const std::string& filename) override;
  Status EraseSlot(int32_t slot) override;
  std::string MetricsText() override;
  std::string CacheJson() override;
  std::string CacheTreeJson() override;

 private:
  struct Pending {
    uint64_t id = 0;
    GenerationRequest request;
    std::shared_ptr<RequestSink> sink;
    double submitted_at = 0;
    bool waited_for_memory = false;   // counted once in admission_waits
    std::shared_ptr<const grammar::Grammar> grammar;  // compiled request.sampling.grammar (null: none)
    std::shared_ptr<const DryBreakers> dry;           // its DRY breaker table (null: DRY off)
    std::shared_ptr<const remote::RemoteFetch> remote;  // what the remote tier brought (on the request's thread)
    std::shared_ptr<const DiskFetch> disk;              // what the disk tier read (on the request's thread)
  };
  // An admitted request bound to a sequence slot (engine thread only).
  struct Active {
    uint64_t id = 0;
    GenerationRequest request;
    std::shared_ptr<RequestSink> sink;
    std::unique_ptr<Sampler> sampler;
    memory::SeqId seq = memory::kNone;
    int32_t n_evaluated = 0;          // tokens of prompt+generated evaluated
    std::vector<int32_t> generated;
    int32_t pending_token = -1;       // sampled, not yet evaluated
    CacheReport report;
    int32_t prompt_evaluated = 0;
    double t_start = 0, t_first = 0;
    std::unique_ptr<Progress> prefill;  // progress log of a long prompt evaluation (after its first chunk)
    model::SeqImages images;          // request.images as the model reads them (rows owned by request.images)
    // Speculative decoding (adaptive draft length).
    int32_t draft_len = 0;            // tokens to draft next round
    std::vector<int32_t> draft_context;  // prompt + generated as the drafters read it, appended to, not rebuilt
    int32_t skip = 0;                 // decode steps left without drafting (back-off after poor acceptance)
    int32_t backoff = 1;
    int32_t last_accepted = 0;        // drafted tokens accepted in the last verify round
    int32_t fail_streak = 0;          // verify rounds in a row that accepted nothing
    // Measured cost (moving averages of step seconds per emitted token): drafting continues only while its
    // rounds emit tokens faster than plain steps do for this request (0 = not measured yet).
    double plain_spt = 0, spec_spt = 0;
    int32_t plain_steps = 0, spec_rounds = 0;
    int32_t drafted = 0, accepted = 0;
  };
  struct Counters {
    uint64_t requests = 0, requests_ok = 0, requests_cancelled = 0, requests_error = 0;
    uint64_t prompt_tokens = 0, prompt_evaluated = 0, cached_tokens = 0, generated = 0;
    uint64_t miss_no_shared_prefix = 0, miss_no_exact_state = 0, hits_exact = 0;
    std::map<std::string, uint64_t> resume_source;
    uint64_t batches = 0, batch_tokens = 0;
    uint64_t batches_top_k = 0;         // batches whose rows were sampled from the forward's top-k pairs
    uint64_t admission_waits = 0;       // requests that waited for the running ones' reserved memory
    double prompt_seconds = 0, decode_seconds = 0;
    uint64_t spec_rounds = 0, spec_drafted = 0, spec_accepted = 0, spec_rollbacks = 0;
    std::vector<uint64_t> spec_drafted_at = std::vector<uint64_t>(64), spec_accepted_at = std::vector<uint64_t>(64);
    double rollback_seconds = 0;
    double spec_draft_seconds = 0;   // drafters: Draft and Observe
    double spec_verify_seconds = 0;  // forward time of decode items that carried a draft (part of decode_seconds)
  };

  explicit EngineImpl(const EngineConfig& config) : config_(config) {}
  void Loop();
  void RunTasks();
  void Admit();
  bool Step();  // one batch; false when there was nothing to do
  // ForwardOptions::top_k for a batch: the largest Sampler::CandidatesNeeded() of the requests whose rows it
  // samples, or 0 (full rows) when sample_top_k is off or one of them needs the full row (its sampler
  // configuration, logprobs).
  int32_t BatchTopK(std::span<const EvalItem> items, std::span<const size_t> item_slot) const;
  // Output row r of a forward as the sampler reads it (pairs when the forward ran with top_k).
  static SampleRow RowOf(const model::ForwardOutput& out, int32_t r) {
    return out.top_k > 0 ? SampleRow::Top(out.Top(r), out.n_vocab) : SampleRow::Full(out.Row(r));
  }
  void Emit(Active& a, const SampleRow& row);
  // Emits `token` (chosen from `row`) for the request in `slot`; false if the request finished.
  bool EmitToken(size_t slot, Active& a, int32_t token, const SampleRow& row);
  // Verifies a speculative item: accepts a prefix of the draft, emits tokens, rolls the rejected tail back.
  void VerifyDraft(size_t slot, const model::ForwardOutput& out, int32_t first_row, int32_t pos0,
                   std::span<const int32_t> item_tokens);
  int32_t PlanDraft(Active& a) const;
  struct DecodeCost {
    size_t slot;
    uint64_t id;
    size_t generated_before;
    bool drafted;
  };
  void UpdateDraftCost(const std::vector<DecodeCost>& costs, double seconds);
  void Finish(size_t slot, const std::string& reason, std::optional<Error> error = std::nullopt);
  Status ValidateRequest(const GenerationRequest& r) const;
  // Runs fn on the engine thread (between two steps) and waits for it; false (fn not run) once stopping.
  bool RunOnEngine(std::function<void()> fn);

  EngineConfig config_;
  EngineInfo info_;
  std::unique_ptr<model::Model> model_;
  std::unique_ptr<HybridCache> cache_;
  std::vector<int32_t> eog_;
  SamplerVocab vocab_;  // token texts, tokenizer and token trie for grammars and DRY
  std::once_flag trie_once_;  // vocab_.trie is built by the first Submit with a grammar (on its thread)
  std::vector<std::unique_ptr<Drafter>> drafters_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> queue_;
  std::vector<uint64_t> cancels_;
  std::deque<std::function<void()>> tasks_;
  bool stop_ = false;
  std::atomic<uint64_t> next_id_{1};
  std::thread thread_;

  // Engine thread only.
  std::vector<std::unique_ptr<Active>> slots_;  // [n_parallel]
  std::deque<Pending> waiting_;
  Counters counters_;
  std::mutex stats_mu_;  // guards a copy of counters_ for MetricsText
  Counters published_;
  std::vector<SlotInfo> slot_infos_;
  std::vector<std::vector<int32_t>> slot_tokens_;  // [n_parallel] evaluated tokens of the slot's last request
};

}  // namespace rw::engine
