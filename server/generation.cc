#include "server/generation.h"

#include <utility>

namespace rw::server {

bool QueueSink::OnToken(const engine::TokenEvent& event) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(event);
  }
  cv_.notify_one();
  return !cancelled_.load();
}

void QueueSink::OnDone(const engine::Completion& done) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = done;
  }
  cv_.notify_one();
}

bool QueueSink::Wait(std::chrono::milliseconds timeout, std::vector<engine::TokenEvent>* events,
                     std::optional<engine::Completion>* done) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return !events_.empty() || done_.has_value(); });
  for (auto& e : events_) events->push_back(std::move(e));
  events_.clear();
  if (done_) {
    *done = std::move(done_);
    done_.reset();
    return true;
  }
  return false;
}

Generation::Generation(const Backend& backend, std::unique_ptr<OutputParser> parser,
                       std::vector<std::string> stops, bool logprobs)
    : backend_(backend),
      parser_(std::move(parser)),
      text_(std::move(stops)),
      logprobs_(logprobs),
      sink_(std::make_shared<QueueSink>()) {}

Generation::~Generation() {
  // A worker that leaves early (exception, client gone) must not leave the request running.
  if (submitted_ && !completion_) {
    sink_->Cancel();
    backend_.engine->Cancel(id_);
  }
}

void Generation::SetReasoningBudget(ReasoningBudget budget) {
  budget_ = std::move(budget);
  in_think_ = budget_.starts_in_reasoning;
  think_decided_ = budget_.starts_in_reasoning;
}

Status Generation::Submit(engine::GenerationRequest request) {
  if (budget_.tokens > 0 && !submitted_) request_ = request;
  auto id = backend_.engine->Submit(std::move(request), sink_);
  if (!id.ok()) return id.error();
  id_ = *id;
  submitted_ = true;
  return Status::Ok();
}

void Generation::Cancel() {
  if (cancelled_ || completion_) return;
  cancelled_ = true;
  sink_->Cancel();
  backend_.engine->Cancel(id_);
}

void Generation::Append(const ParsedDelta& d, GenerationChunk* out) {
  out->delta.reasoning += d.reasoning;
  out->delta.content += d.content;
  for (const auto& call : d.tool_calls) {
    out->delta.tool_calls.push_back(call);
    saw_tool_calls_ = true;
  }
}

bool Generation::Poll(std::chrono::milliseconds timeout, GenerationChunk* out) {
  if (completion_) return true;
  std::vector<engine::TokenEvent> events;
  std::optional<engine::Completion> done;
  sink_->Wait(timeout, &events, &done);
  const TextCodec& codec = *backend_.codec;
  for (const auto& e : events) {
    if (stop_matched_ || cancelled_ || forcing_) break;
    ++accepted_;
    if (budget_.tokens > 0) ids_.push_back(e.token);
    if (logprobs_) {
      TokenReport r{e.token, codec.TokenToPiece(e.token, true), e.logprob, {}};
      for (const auto& t : e.top) {
        r.top.emplace_back(codec.TokenToPiece(t.token, true), t.logprob);
        r.top_ids.push_back(t.token);
      }
      out->tokens.push_back(std::move(r));
    }
    if (codec.IsEog(e.token)) continue;
    std::string piece = codec.TokenToPiece(e.token, false);
    bool thinking = in_think_;
    if (budget_.tokens > 0 && !forced_) TrackThinking(piece);
    PushText(piece, out);
    if (text_.stopped()) {
      stop_matched_ = true;
      sink_->Cancel();
      backend_.engine->Cancel(id_);
    } else if (thinking && in_think_ && !forced_ && ++think_tokens_ >= budget_.tokens) {
      forcing_ = true;  // the budget is spent: end this request, continue with the end of thinking
      sink_->Cancel();
      backend_.engine->Cancel(id_);
    }
  }
  if (!done) return false;
  if (forcing_ && done->finish_reason != "error") return ContinueAfterBudget(std::move(*done), out);
  if (first_) {  // the continuation ended: report the request as one
    engine::Completion& c = *done;
    c.generated_tokens += first_->generated_tokens;
    c.predicted_ms += first_->predicted_ms + c.prompt_ms;
    c.prompt_tokens = first_->prompt_tokens;
    c.cached_tokens = first_->cached_tokens;
    c.prompt_evaluated = first_->prompt_evaluated;
    c.prompt_ms = first_->prompt_ms;
    c.cache = first_->cache;
    c.drafted += first_->drafted;
    c.accepted += first_->accepted;
  }
  completion_ = std::move(done);
  std::string tail = text_.Finish();
  if (parser_) {
    if (!tail.empty()) Append(parser_->Push(tail), out);
    Append(parser_->Finish(), out);
  } else {
    out->delta.content += tail;
  }
  return true;
}

void Generation::PushText(const std::string& piece, GenerationChunk* out) {
  std::string text = text_.Push(piece);
  if (text.empty()) return;
  if (parser_) {
    Append(parser_->Push(text), out);
  } else {
    out->delta.content += text;
  }
}

void Generation::TrackThinking(const std::string& piece) {
  if (!think_decided_) {  // does the answer open a <think> block itself?
    head_ += piece;
    size_t i = head_.find_first_not_of(" \t\r\n");
    if (i != std::string::npos) {
      std::string_view rest = std::string_view(head_).substr(i);
      std::string_view open = "<think>";
      if (rest.size() >= open.size() || rest != open.substr(0, rest.size())) {
        think_decided_ = true;
        in_think_ = rest.substr(0, open.size()) == open;
        tail_ = head_;
      }
    }
    if (!in_think_) return;
  } else {
    tail_ += piece;
  }
  if (tail_.find("</think>") != std::string::npos) in_think_ = false;
  if (tail_.size() > 16) tail_.erase(0, tail_.size() - 16);
}

bool Generation::ContinueAfterBudget(engine::Completion first, GenerationChunk* out) {
  forcing_ = false;
  forced_ = true;
  std::vector<int32_t> forced = backend_.codec->Encode(budget_.forced, /*parse_special=*/true, /*add_special=*/false);
  engine::GenerationRequest next = request_;
  next.prompt.insert(next.prompt.end(), ids_.begin(), ids_.end());
  next.prompt.insert(next.prompt.end(), forced.begin(), forced.end());
  next.checkpoint_hints.clear();
  accepted_ += static_cast<int32_t>(forced.size());
  PushText(budget_.forced, out);
  first_ = std::move(first);
  if (request_.max_tokens > 0) {
    next.max_tokens = request_.max_tokens - accepted_;
    if (next.max_tokens <= 0) {  // no room left for an answer
      completion_ = *first_;
      completion_->finish_reason = "length";
      if (parser_) Append(parser_->Finish(), out);
      return true;
    }
  }
  sink_ = std::make_shared<QueueSink>();
  Status st = Submit(std::move(next));
  if (!st.ok()) {
    completion_ = *first_;
    completion_->finish_reason = "error";
    completion_->error = st.error();
    return true;
  }
  return false;
}

std::string Generation::FinishReason() const {
  if (!completion_) return "";
  const std::string& r = completion_->finish_reason;
  if (stop_matched_) return saw_tool_calls_ ? "tool_calls" : "stop";
  if (r == "stop" && saw_tool_calls_) return "tool_calls";
  if (r == "cancelled") return "stop";
  return r;
}

}  // namespace rw::server
