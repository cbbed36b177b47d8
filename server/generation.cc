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

Status Generation::Submit(engine::GenerationRequest request) {
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
    if (stop_matched_ || cancelled_) break;
    ++accepted_;
    if (logprobs_) {
      TokenReport r{e.token, codec.TokenToPiece(e.token, true), e.logprob, {}};
      for (const auto& t : e.top) r.top.emplace_back(codec.TokenToPiece(t.token, true), t.logprob);
      out->tokens.push_back(std::move(r));
    }
    if (codec.IsEog(e.token)) continue;
    std::string text = text_.Push(codec.TokenToPiece(e.token, false));
    if (!text.empty()) {
      if (parser_) {
        Append(parser_->Push(text), out);
      } else {
        out->delta.content += text;
      }
    }
    if (text_.stopped()) {
      stop_matched_ = true;
      sink_->Cancel();
      backend_.engine->Cancel(id_);
    }
  }
  if (!done) return false;
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

std::string Generation::FinishReason() const {
  if (!completion_) return "";
  const std::string& r = completion_->finish_reason;
  if (stop_matched_) return saw_tool_calls_ ? "tool_calls" : "stop";
  if (r == "stop" && saw_tool_calls_) return "tool_calls";
  if (r == "cancelled") return "stop";
  return r;
}

}  // namespace rw::server
