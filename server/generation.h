// One submitted generation seen from an HTTP worker thread: the engine thread pushes events into a queue
// (never blocking), the worker drains it, turns tokens into released text (stop strings, UTF-8), parses
// reasoning and tool calls, and cancels the request when the client is gone or a stop string matched.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "server/backend.h"
#include "server/text_stream.h"

namespace rw::server {

// Engine-thread side: a queue of events, read by the worker.
class QueueSink : public engine::RequestSink {
 public:
  bool OnToken(const engine::TokenEvent& event) override;
  void OnDone(const engine::Completion& done) override;
  // Worker side: waits up to `timeout` for anything new and moves it out. Returns true once OnDone was seen
  // (and every token before it has been moved out).
  bool Wait(std::chrono::milliseconds timeout, std::vector<engine::TokenEvent>* events,
            std::optional<engine::Completion>* done);
  void Cancel() { cancelled_.store(true); }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<engine::TokenEvent> events_;
  std::optional<engine::Completion> done_;
  std::atomic<bool> cancelled_{false};
};

// One generated token as reported with logprobs.
struct TokenReport {
  int32_t token = 0;
  std::string piece;  // raw bytes (special tokens rendered)
  float logprob = 0;
  std::vector<std::pair<std::string, float>> top;  // piece, logprob
  std::vector<int32_t> top_ids;                     // the token id of each entry of `top`
};

struct GenerationChunk {
  ParsedDelta delta;
  std::vector<TokenReport> tokens;  // filled when logprobs were requested
  bool empty() const { return delta.empty() && tokens.empty(); }
};

// llama-server's reasoning budget: once the answer has spent `tokens` tokens inside a <think> block (opened by
// the prompt or by the answer), the engine request is cancelled and continued from the tokens so far plus
// `forced` (the thoughts end there), as llama-server forces its end-of-thinking tokens. The continuation resumes
// from the cancelled sequence's cached state, so nothing before it is evaluated again.
struct ReasoningBudget {
  int32_t tokens = -1;  // -1: unrestricted
  bool starts_in_reasoning = false;
  std::string forced = "\n</think>\n\n";
};

class Generation {
 public:
  // `parser` may be null (text completions: everything is content).
  Generation(const Backend& backend, std::unique_ptr<OutputParser> parser, std::vector<std::string> stops,
             bool logprobs);
  ~Generation();

  // Before Submit.
  void SetReasoningBudget(ReasoningBudget budget);
  Status Submit(engine::GenerationRequest request);
  // Waits up to `timeout` for progress and appends it to `out`. Returns true when the generation is over.
  bool Poll(std::chrono::milliseconds timeout, GenerationChunk* out);
  // The client went away.
  void Cancel();

  const engine::Completion& completion() const { return *completion_; }
  bool done() const { return completion_.has_value(); }
  // The stop string that ended the answer ("" if none).
  const std::string& matched_stop() const { return text_.matched(); }
  // "stop", "length", "tool_calls", "error" (cancelled by a stop string counts as "stop").
  std::string FinishReason() const;
  int32_t accepted_tokens() const { return accepted_; }
  bool saw_tool_calls() const { return saw_tool_calls_; }

 private:
  void Append(const ParsedDelta& d, GenerationChunk* out);
  void PushText(const std::string& piece, GenerationChunk* out);
  void TrackThinking(const std::string& piece);
  // The budget ran out and the first request is over: continue with the forced end of thinking.
  bool ContinueAfterBudget(engine::Completion first, GenerationChunk* out);
  const Backend backend_;
  std::unique_ptr<OutputParser> parser_;
  TextStream text_;
  bool logprobs_;
  std::shared_ptr<QueueSink> sink_;
  uint64_t id_ = 0;
  bool submitted_ = false;
  bool stop_matched_ = false;
  bool cancelled_ = false;
  bool saw_tool_calls_ = false;
  int32_t accepted_ = 0;
  std::optional<engine::Completion> completion_;
  // Reasoning budget.
  ReasoningBudget budget_;
  engine::GenerationRequest request_;       // as submitted first
  std::vector<int32_t> ids_;                // accepted token ids
  bool in_think_ = false, think_decided_ = false, forcing_ = false, forced_ = false;
  int32_t think_tokens_ = 0;
  std::string head_, tail_;                 // the answer's first bytes; its last bytes
  std::optional<engine::Completion> first_; // the request the budget ended
};

}  // namespace rw::server
