// The one header the server sees. One engine thread owns sequences and memory; the server submits validated
// requests and receives tokens through a sink whose callbacks run on the engine thread (they must not block).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/expected.h"

namespace rw::grammar {
struct Grammar;
}

namespace rw::engine {

// One stage of the sampler chain (llama.cpp's names in parentheses, as in the `samplers` request field).
enum class SamplerStage : uint8_t {
  kPenalties,    // (penalties) repeat / frequency / presence penalties over the last repeat_last_n tokens
  kDry,          // (dry) "don't repeat yourself" penalty on tokens extending a repeated sequence
  kTopNSigma,    // (top_n_sigma) keep logits within n standard deviations of the maximum
  kTopK,         // (top_k)
  kTypicalP,     // (typ_p) locally typical sampling
  kTopP,         // (top_p) nucleus
  kMinP,         // (min_p)
  kXtc,          // (xtc) exclude top choices
  kTemperature,  // (temperature)
};

struct LogitBias {
  int32_t token = 0;
  float bias = 0.0f;  // added to the logit; -inf bans the token
};

// Sampling as llama-server does it (semantics of llama.cpp's sampler chain): logit_bias, then the grammar mask,
// then `stages` in order, then a draw (or mirostat v1/v2 after temperature, ignoring `stages`). The neutral
// values below switch each stage off; the server fills llama-server's defaults from its flags.
struct SamplingParams {
  float temperature = 0.8f;  // <= 0: greedy (the highest logit left, ties -> lowest id)
  float top_p = 1.0f;        // 1 = off
  int32_t top_k = 0;         // <= 0 = off
  float min_p = 0.0f;        // 0 = off
  float typical_p = 1.0f;    // 1 = off
  float top_n_sigma = -1.0f; // <= 0 = off
  float xtc_probability = 0.0f, xtc_threshold = 0.1f;  // off unless probability > 0 and threshold <= 0.5
  int32_t repeat_last_n = 64;  // tokens (prompt included) the penalties look at; 0 = off
  float repeat_penalty = 1.0f, frequency_penalty = 0.0f, presence_penalty = 0.0f;
  float dry_multiplier = 0.0f, dry_base = 1.75f;  // DRY off unless multiplier != 0 and base >= 1
  int32_t dry_allowed_length = 2, dry_penalty_last_n = 64;  // -1: the whole context, 0: off
  std::vector<std::string> dry_sequence_breakers = {"\n", ":", "\"", "*"};
  int32_t mirostat = 0;      // 0 = off, 1 = mirostat, 2 = mirostat 2.0
  float mirostat_tau = 5.0f, mirostat_eta = 0.1f;
  int32_t min_keep = 0;      // filters keep at least this many tokens
  std::vector<LogitBias> logit_bias;  // applied in one pass per token: callers keep it short (a server limit)
  std::vector<SamplerStage> stages = {SamplerStage::kPenalties, SamplerStage::kDry,   SamplerStage::kTopNSigma,
                                      SamplerStage::kTopK,      SamplerStage::kTypicalP, SamplerStage::kTopP,
                                      SamplerStage::kMinP,      SamplerStage::kXtc,   SamplerStage::kTemperature};
  // GBNF grammar text the output must match ("" = none); validated by the server (grammar::Parse).
  std::string grammar;
  uint64_t seed = 0;         // per-request RNG seed
};

// An image in the prompt (docs/images.md): prompt[start, start + nx·ny) are its placeholder ids, derived from the
// image's content key and outside the vocabulary (>= 2^30), so the prefix cache keys the span by content; rows
// is the vision encoder's output [ny·nx][n_embd] (shared with the encoder cache).
struct PromptImage {
  int32_t start = 0;
  int32_t nx = 0, ny = 0;  // token grid: nx per row, ny rows
  std::shared_ptr<const std::vector<float>> rows;
};

struct GenerationRequest {
  std::vector<int32_t> prompt;              // at least one token
  // Prefix-cache placement hints: token positions where a checkpoint is worth keeping (chat message starts,
  // the end of the prompt before the generation header, positions a client asked for). Sorted, < prompt size.
  std::vector<int32_t> checkpoint_hints;
  // Token position where the answer's message starts (the chat template's generation header), -1 if unknown. The
  // next turn branches there when the answer is rewritten (reasoning stripped, tool call re-rendered), so the
  // remote tier always shares the state at that point; other replicas find it among their message starts.
  int32_t generation_start = -1;
  int32_t max_tokens = -1;                  // -1: until an end-of-generation token or the context is full
  SamplingParams sampling;
  // sampling.grammar compiled by the caller (the server compiles it once, on the request's thread, within its
  // limits); null: Submit compiles it. Submit also builds the request's DRY breaker table on the caller's
  // thread, so the engine thread only runs prepared work.
  std::shared_ptr<const grammar::Grammar> compiled_grammar;
  bool logprobs = false;                    // report the sampled token's log-probability
  int32_t top_logprobs = 0;                 // and the n most likely alternatives (0..20)
  bool ignore_eos = false;                  // do not stop at end-of-generation tokens
  bool cache_prompt = true;                 // false: neither read nor write the prefix cache
  int32_t slot_id = -1;                     // -1 = any free sequence slot
  std::vector<PromptImage> images;          // sorted by start, disjoint; empty for text-only prompts
};

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0.0f;
};

struct TokenEvent {
  int32_t token = 0;
  float logprob = 0.0f;                     // valid when the request asked for logprobs
  std::vector<TokenLogprob> top;            // descending, top_logprobs entries
};

// I4: what the request reused and why it processed more than the minimum.
struct CacheReport {
  int32_t lcp = 0;             // longest common prefix with anything cached
  int32_t resume_pos = 0;      // position the prompt evaluation resumed from
  std::string source = "none"; // "live" | "checkpoint" | "replay" | "disk" | "remote" | "none"
  int32_t extra_tokens = 0;    // tokens processed beyond the minimum (prompt - lcp, at least 1)
  std::string reason;          // human-readable, e.g. "nearest checkpoint at 1200, LCP at 1450"
  // The remote tier (--remote-cache): bytes fetched for this request and the time the lookup took (0 when the
  // tier is off or was not asked); source is "remote" when the prompt resumed from the state it brought.
  int64_t remote_bytes = 0;
  double remote_ms = 0;
};

// A finished request's end state (where the next turn resumes) on its way to the disk tier (--cache-dir). The
// engine thread only queues it; a caller that must not acknowledge the response before a crash would keep it
// (the server, before a response's last event) waits here, on its own thread.
class PersistTicket {
 public:
  enum class Outcome {
    kVisible,    // its value and the index naming it are in place: a restart after kill -9 resumes from it
    kNotStored,  // the disk tier did not keep it (a write failed, the store refused or evicted it)
    kTimedOut,   // not in place yet when the timeout passed
  };
  virtual ~PersistTicket() = default;
  // Blocks up to `timeout`. Never call it on the engine thread.
  virtual Outcome Wait(std::chrono::milliseconds timeout) const = 0;
  // Token position of the state (its prefix length).
  virtual int32_t position() const = 0;
};

struct Completion {
  std::string finish_reason;   // "stop" (end-of-generation token), "length", "cancelled", "error"
  std::optional<Error> error;  // set when finish_reason == "error"
  int32_t prompt_tokens = 0;
  int32_t cached_tokens = 0;   // prompt tokens reused (= resume position)
  int32_t prompt_evaluated = 0;// prompt tokens evaluated
  int32_t generated_tokens = 0;
  double prompt_ms = 0, predicted_ms = 0;
  int32_t slot_id = -1;
  CacheReport cache;
  // Speculative decoding statistics of this request (zero when off).
  int32_t drafted = 0, accepted = 0;
  // The disk tier's write of the state at the request's end (or of the deepest state of its path the tier keeps);
  // null when nothing is on its way there (no disk tier, the cache off for the request, a failed request).
  std::shared_ptr<const PersistTicket> persist;
};

class RequestSink {
 public:
  virtual ~RequestSink() = default;
  // One call per generated token. Return false to cancel (client gone, stop string matched).
  virtual bool OnToken(const TokenEvent& event) = 0;
  // Exactly one call per accepted request, last.
  virtual void OnDone(const Completion& done) = 0;
};

struct EngineInfo {
  std::string model_name;
  std::string model_path;
  int32_t n_ctx = 0;           // per-sequence context
  int32_t n_ctx_train = 0;
  int32_t n_vocab = 0;
  int32_t n_parallel = 0;      // sequence slots
  std::vector<int32_t> eog_tokens;
  std::string device = "cpu";  // where the forward runs: "cpu" or "vulkanN (name, memory)"
  std::string draft_device;    // where --spec draft's draft model runs (as `device`); empty without one
  // On a GPU, at load: the device's memory, what the weights and first scratch take, the KV page pool and the
  // recurrent-state slots held there (docs/gpu.md); the cache budget's checkpoints are host memory. 0 on the CPU.
  uint64_t device_memory_total = 0, device_weights_bytes = 0, device_kv_bytes = 0, device_state_bytes = 0;
  std::string arch;            // general.architecture of the model
  int32_t n_embd = 0;          // embedding length (what image rows must have)
  bool images = false;         // the model takes image embeddings (qwen35 / qwen35moe: IMRoPE positions)
};

struct SlotInfo {
  int32_t id = 0;
  bool busy = false;
  int32_t n_ctx = 0;
  int32_t n_tokens = 0;        // tokens currently held by the slot's sequence
  uint64_t task_id = 0;
};

class Engine {
 public:
  virtual ~Engine() = default;
  // Thread-safe. Queues the request (it waits when all slots are busy). Errors: invalid request (empty prompt,
  // longer than the context, bad token id, bad parameter).
  virtual Expected<uint64_t> Submit(GenerationRequest request, std::shared_ptr<RequestSink> sink) = 0;
  // Thread-safe; the sink still gets OnDone("cancelled").
  virtual void Cancel(uint64_t request_id) = 0;
  virtual EngineInfo Info() const = 0;
  virtual std::vector<SlotInfo> Slots() = 0;
  // llama-server slot actions; `filename` is relative to the slot-save directory. Return JSON-ready numbers.
  struct SlotFileResult {
    int32_t n_tokens = 0;
    uint64_t n_bytes = 0;
    double ms = 0;
  };
  virtual Expected<SlotFileResult> SaveSlot(int32_t slot, const std::string& filename) = 0;
  virtual Expected<SlotFileResult> RestoreSlot(int32_t slot, const std::string& filename) = 0;
  virtual Status EraseSlot(int32_t slot) = 0;
  // Prometheus text exposition of the engine's counters (without trailing server metrics).
  virtual std::string MetricsText() = 0;
  // JSON text for GET /cache (tree size, checkpoints, bytes per tier).
  virtual std::string CacheJson() = 0;
  // JSON text for GET /cache/tree (the web page's memory view): prefix-tree nodes with their checkpoints and
  // pins, running sequences, disk-only checkpoints. Engines without a prefix tree answer an empty tree.
  virtual std::string CacheTreeJson() { return R"({"nodes":[],"sequences":[],"disk_only":[]})"; }
};

}  // namespace rw::engine
