// POST /v1/chat/completions and /v1/completions: render, tokenize, submit, then stream SSE chunks or collect.
#include <algorithm>
#include <random>

#include "base/log.h"
#include "server/connection_probe.h"
#include "server/generation.h"
#include "server/openai_writer.h"
#include "server/responses.h"
#include "server/image_prompt.h"
#include "server/server_impl.h"
#include "server/tool_constraint.h"
#include "grammar/tool_grammar.h"

namespace rw::server {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {


std::vector<int32_t> NormaliseHints(std::vector<int32_t> hints, size_t prompt_size) {
  std::sort(hints.begin(), hints.end());
  hints.erase(std::unique(hints.begin(), hints.end()), hints.end());
  hints.erase(std::remove_if(hints.begin(), hints.end(),
                             [&](int32_t p) { return p <= 0 || static_cast<size_t>(p) >= prompt_size; }),
              hints.end());
  return hints;
}

// Paragraph starts ("\n\n" then text) inside messages are where clients edit long messages: a timestamp line
// after a fixed preamble, a per-request header, a pruned section. Each becomes a checkpoint hint when it lies at
// least kParagraphGap tokens after the previous hint, so short paragraphs do not multiply checkpoints; the
// cache's eviction score drops the ones that never serve a request.
constexpr int32_t kParagraphGap = 32;

void AddParagraphHints(const TextCodec& codec, const std::string& text, const std::vector<int32_t>& tokens,
                       std::vector<int32_t>* hints) {
  std::vector<size_t> starts;
  for (size_t q = text.find("\n\n"); q != std::string::npos; q = text.find("\n\n", q + 2)) {
    size_t start = q + 2;
    while (start < text.size() && text[start] == '\n') ++start;
    if (start < text.size()) starts.push_back(start);
  }
  if (starts.empty()) return;
  std::vector<int32_t> sorted = *hints;
  std::sort(sorted.begin(), sorted.end());
  for (int32_t pos : OffsetsToTokenPositions(codec, tokens, starts)) {
    auto it = std::upper_bound(sorted.begin(), sorted.end(), pos);
    int32_t prev = it == sorted.begin() ? 0 : *(it - 1);
    int32_t next = it == sorted.end() ? static_cast<int32_t>(tokens.size()) : *it;
    if (pos - prev >= kParagraphGap && next - pos >= kParagraphGap / 2) sorted.insert(it, pos);
  }
  *hints = std::move(sorted);
}

// Content parts: a client that sends a message as several parts (a long context part, then a short one it
// changes from turn to turn) makes later prompts diverge at a part boundary. The byte offsets where each text
// part after the first starts, found in order inside its message's rendering.
std::vector<size_t> ContentPartOffsets(const nlohmann::ordered_json& messages, const std::string& text,
                                       const std::vector<size_t>& message_offsets) {
  std::vector<size_t> out;
  if (!messages.is_array() || message_offsets.size() != messages.size()) return out;
  for (size_t i = 0; i < messages.size(); ++i) {
    const auto& m = messages[i];
    if (!m.is_object() || !m.contains("content") || !m["content"].is_array()) continue;
    size_t at = message_offsets[i];
    bool first = true;
    for (const auto& part : m["content"]) {
      if (!part.is_object() || !part.contains("text") || !part["text"].is_string()) continue;
      const std::string& t = part["text"].get_ref<const std::string&>();
      if (t.empty()) continue;
      const size_t found = text.find(t, at);
      if (found == std::string::npos) break;
      if (!first) out.push_back(found);
      first = false;
      at = found + t.size();
    }
  }
  return out;
}

// The last prompt positions: a regenerated prompt diverges at its very end (one token must be evaluated), and
// the next chat turn re-renders the generation prompt's tail ("<think>\n" becomes "<think>\n\n</think>"), so
// it diverges one or two tokens before the end. States there turn those re-evaluations into the minimum.
void AddPromptEndHints(size_t prompt_size, std::vector<int32_t>* hints) {
  for (int32_t back : {1, 2})
    if (static_cast<int64_t>(prompt_size) - back > 0) hints->push_back(static_cast<int32_t>(prompt_size) - back);
}

// logit_bias as the engine applies it on every token: one entry per token id, sorted, duplicates summed
// (llama-server adds every entry), checked against the vocabulary. Text keys expand to several tokens each,
// so the limit is checked again on the result.
std::optional<ApiError> PrepareLogitBias(int32_t n_vocab, const RequestLimits& limits,
                                         std::vector<engine::LogitBias>* bias) {
  if (static_cast<int64_t>(bias->size()) > limits.logit_bias * 4)
    return OverLimit("logit_bias", "expands to " + std::to_string(bias->size()) + " token entries",
                     limits.logit_bias * 4, "4 x --max-logit-bias");
  std::sort(bias->begin(), bias->end(), [](const auto& a, const auto& b) { return a.token < b.token; });
  std::vector<engine::LogitBias> merged;
  for (const auto& b : *bias) {
    if (b.token < 0 || b.token >= n_vocab)
      return ApiError::BadRequest("'logit_bias' names token " + std::to_string(b.token) +
                                      ", outside the vocabulary [0, " + std::to_string(n_vocab) + ")",
                                  "logit_bias");
    if (!merged.empty() && merged.back().token == b.token)
      merged.back().bias += b.bias;
    else
      merged.push_back(b);
  }
  *bias = std::move(merged);
  return std::nullopt;
}

double MsSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// The state of one response, shared by the poller and the final summary.
struct ResponseState {
  std::shared_ptr<Generation> gen;
  std::unique_ptr<ResponseWriter> writer;
  bool stream = false;
  int32_t prompt_tokens = 0;
  Clock::time_point start;
  Clock::time_point last_write;
  bool started = false;
  bool finished = false;
  GenerationChunk total;  // non-streaming: everything
};

}  // namespace

void Server::Impl::HandleChat(const httplib::Request& req, httplib::Response& res) {
  auto body = ParseJsonBody(req.body, parse_options.limits);
  nlohmann::ordered_json* j = nullptr;
  if (!Take(body, res, &j)) return;
  auto parsed = ParseChatRequest(*j, parse_options);
  ChatRequest* r = nullptr;
  if (!Take(parsed, res, &r)) return;
  auto prepared = PrepareChat(*r, nullptr);
  PreparedGeneration* p = nullptr;
  if (!Take(prepared, res, &p)) return;
  p->writer = NewOpenAiWriter({true, r->gen.include_usage, r->gen.logprobs, config.model_name,
                               static_cast<int32_t>(p->prompt.size())});
  RunGeneration(req, res, std::move(*p));
}

ParseResult<PreparedGeneration> Server::Impl::PrepareChat(ChatRequest& r, const ExtraHints& extra_hints) {
  ChatOptions options;
  options.kwargs = config.chat_template_kwargs;
  for (auto& [k, v] : r.template_kwargs.items()) options.kwargs[k] = v;
  int32_t budget = r.reasoning_budget >= -1 ? r.reasoning_budget : config.reasoning_budget;
  if (budget == 0 && !options.kwargs.contains("enable_thinking")) {
    options.kwargs["enable_thinking"] = false;  // llama-server: a budget of 0 ends thinking at once
  }
  nlohmann::ordered_json tools = r.tool_choice == "none" ? nlohmann::ordered_json(nullptr) : r.tools;
  auto rendered = backend.chat->Render(r.messages, tools, options);
  if (!rendered.ok()) return ApiError::FromError(rendered.error());
  PreparedGeneration p;
  p.prompt = backend.codec->Encode(rendered->prompt, /*parse_special=*/true, /*add_special=*/true);
  std::vector<size_t> offsets = rendered->message_offsets;
  offsets.push_back(rendered->generation_offset);
  for (size_t part : ContentPartOffsets(r.messages, rendered->prompt, rendered->message_offsets))
    offsets.push_back(part);
  if (extra_hints) {
    for (size_t off : extra_hints(*rendered)) offsets.push_back(off);
  }
  std::sort(offsets.begin(), offsets.end());
  std::vector<int32_t> hints = OffsetsToTokenPositions(*backend.codec, p.prompt, offsets);
  hints.insert(hints.end(), r.checkpoint_positions.begin(), r.checkpoint_positions.end());
  hints = NormaliseHints(std::move(hints), p.prompt.size());
  AddParagraphHints(*backend.codec, rendered->prompt, p.prompt, &hints);
  AddPromptEndHints(p.prompt.size(), &hints);
  p.checkpoint_hints = NormaliseHints(std::move(hints), p.prompt.size());
  if (rendered->generation_offset < rendered->prompt.size()) {
    const std::vector<int32_t> g = OffsetsToTokenPositions(*backend.codec, p.prompt, {rendered->generation_offset});
    if (!g.empty()) p.generation_start = g.front();
  }
  if (auto e = ExpandChatImages(r.messages, *backend.codec, backend.images, &p)) return *e;
  std::string format = r.reasoning_format.empty() ? config.reasoning_format : r.reasoning_format;
  p.parser = backend.chat->NewParser(*rendered, tools, format);
  p.gen = r.gen;
  if (p.gen.max_tokens < 0) p.gen.max_tokens = config.default_n_predict;
  if (p.gen.sampling.schema && rendered->thinking_open) {  // the JSON answer follows the model's reasoning
    p.gen.sampling.params.grammar = grammar::AfterReasoning(p.gen.sampling.params.grammar);
    p.gen.sampling.compiled = nullptr;  // compiled again, once, by RunGeneration
  }
  if (r.tool_choice == "required" || r.tool_choice.rfind("function:", 0) == 0) {
    if (auto e = ForceToolCalls(r, *rendered, config.sampling_defaults.grammar, &p.gen.sampling.params)) return *e;
    p.gen.sampling.compiled = nullptr;
  }
  if (budget > 0 && format != "none") {
    p.reasoning_budget.tokens = budget;
    p.reasoning_budget.starts_in_reasoning = rendered->thinking_open;
    // llama-server puts the message before the end tag it forces.
    p.reasoning_budget.forced =
        r.reasoning_budget_message.value_or(config.reasoning_budget_message) + p.reasoning_budget.forced;
  }
  return p;
}

void Server::Impl::HandleCompletion(const httplib::Request& req, httplib::Response& res) {
  auto body = ParseJsonBody(req.body, parse_options.limits);
  nlohmann::ordered_json* j = nullptr;
  if (!Take(body, res, &j)) return;
  auto parsed = ParseCompletionRequest(*j, parse_options);
  CompletionRequest* r = nullptr;
  if (!Take(parsed, res, &r)) return;
  PreparedGeneration p;
  p.prompt = r->prompt_is_tokens
                 ? r->prompt_tokens
                 : backend.codec->Encode(r->prompt_text, /*parse_special=*/true, /*add_special=*/true);
  std::vector<int32_t> hints = r->checkpoint_positions;
  AddPromptEndHints(p.prompt.size(), &hints);
  p.checkpoint_hints = NormaliseHints(std::move(hints), p.prompt.size());
  p.gen = r->gen;
  if (p.gen.max_tokens < 0) p.gen.max_tokens = config.default_n_predict;
  bool native = req.path == "/completion";  // llama-server's own shape
  p.writer = native ? NewLlamaCompletionWriter(config.model_name, static_cast<int32_t>(p.prompt.size()), info.n_ctx,
                                               r->gen.logprobs)
                    : NewOpenAiWriter({false, r->gen.include_usage, r->gen.logprobs, config.model_name,
                                       static_cast<int32_t>(p.prompt.size())});
  RunGeneration(req, res, std::move(p));
}

void Server::Impl::AwaitEndState(const Generation& g) {
  const std::shared_ptr<const engine::PersistTicket>& ticket = g.completion().persist;
  if (!ticket || config.cache_disk_wait_ms <= 0) return;
  const auto t0 = Clock::now();
  const auto outcome = ticket->Wait(std::chrono::milliseconds(config.cache_disk_wait_ms));
  const bool timed_out = outcome == engine::PersistTicket::Outcome::kTimedOut;
  metrics.CountDiskWait(std::chrono::duration<double>(Clock::now() - t0).count(), timed_out);
  if (timed_out && !disk_wait_incident.exchange(true)) {
    LOG_WARN("the end state of a response (position %d) was not on disk after %lld ms (--cache-disk-wait): "
             "answered anyway, a crash now would lose it (counted in rewind_server_cache_disk_wait_timeouts_total; "
             "logged once until an end state is in place in time again)",
             ticket->position(), static_cast<long long>(config.cache_disk_wait_ms));
  } else if (!timed_out && disk_wait_incident.exchange(false)) {
    LOG_INFO("responses' end states are on disk within --cache-disk-wait again");
  }
}

void Server::Impl::RunGeneration(const httplib::Request& req, httplib::Response& res, PreparedGeneration p) {
  ResponseWriter& writer = *p.writer;
  auto fail = [&](const ApiError& e) { SendJson(res, e.status, writer.ErrorBody(e)); };
  if (p.prompt.empty()) return fail(ApiError::BadRequest("the prompt is empty", "prompt"));
  int32_t vocab = backend.codec->VocabSize();
  size_t next_image = 0;
  for (size_t i = 0; i < p.prompt.size(); ++i) {
    const int32_t t = p.prompt[i];
    while (next_image < p.images.size() &&
           i >= static_cast<size_t>(p.images[next_image].start + p.images[next_image].nx * p.images[next_image].ny))
      ++next_image;
    if (next_image < p.images.size() && i >= static_cast<size_t>(p.images[next_image].start)) continue;
    if (t < 0 || t >= vocab) {
      return fail(ApiError::BadRequest("token id " + std::to_string(t) + " is outside the vocabulary", "prompt"));
    }
  }
  if (info.n_ctx > 0 && static_cast<int64_t>(p.prompt.size()) >= info.n_ctx) {
    return fail(ApiError::ContextExceeded("the prompt has " + std::to_string(p.prompt.size()) +
                                               " tokens, the context holds " + std::to_string(info.n_ctx) +
                                               " (one is needed for the answer)"));
  }
  engine::GenerationRequest g;
  g.prompt = p.prompt;
  g.checkpoint_hints = p.checkpoint_hints;
  g.generation_start = p.generation_start;
  g.max_tokens = p.gen.max_tokens;
  // The grammar is compiled here once (the parser already compiled it unless it was rewritten since) and
  // handed to the engine with the rest of the request's prepared sampling.
  if (auto e = CompileGrammar(&p.gen.sampling, config.limits, "grammar")) return fail(*e);
  g.compiled_grammar = p.gen.sampling.compiled;
  g.sampling = p.gen.sampling.params;
  for (const auto& [text, bias] : p.gen.sampling.logit_bias_text)
    for (int32_t t : backend.codec->Encode(text, /*parse_special=*/false, /*add_special=*/false))
      g.sampling.logit_bias.push_back({t, bias});
  if (auto e = PrepareLogitBias(vocab, config.limits, &g.sampling.logit_bias)) return fail(*e);
  g.sampling.seed = p.gen.seed               ? *p.gen.seed
                    : config.default_seed >= 0 ? static_cast<uint64_t>(config.default_seed)
                                               : std::random_device{}() * 0x9E3779B97F4A7C15ull + 1;
  g.logprobs = p.gen.logprobs;
  g.top_logprobs = p.gen.top_logprobs;
  g.ignore_eos = p.gen.ignore_eos;
  g.cache_prompt = p.gen.cache_prompt;
  g.slot_id = p.gen.slot_id;
  g.images = std::move(p.images);

  auto st = std::make_shared<ResponseState>();
  st->gen = std::make_shared<Generation>(backend, std::move(p.parser), p.gen.stop, p.gen.logprobs);
  st->gen->SetReasoningBudget(p.reasoning_budget);
  Status submitted = st->gen->Submit(std::move(g));
  if (!submitted.ok()) return fail(ApiError::FromError(submitted.error()));
  st->writer = std::move(p.writer);
  st->stream = p.gen.stream;
  st->prompt_tokens = static_cast<int32_t>(p.prompt.size());
  st->start = st->last_write = Clock::now();
  metrics.RequestStarted();

  // Called once per request when it ends (normally or not).
  auto finish = [this, st, path = req.path](bool client_gone) {
    metrics.RequestFinished();
    if (client_gone) {
      metrics.CountDisconnect();
      if (config.log_requests) LOG_INFO("%s client disconnected, request cancelled", path.c_str());
      return;
    }
    const auto& c = st->gen->completion();
    double total_ms = MsSince(st->start);
    metrics.CountGeneration(st->prompt_tokens, c.cached_tokens, c.prompt_evaluated, c.generated_tokens,
                            total_ms / 1e3);
    if (config.log_requests) {
      LOG_INFO(
          "%s %s slot=%d prompt=%d cached=%d evaluated=%d generated=%d prompt_ms=%.1f (%.1f t/s) "
          "gen_ms=%.1f (%.1f t/s) total_ms=%.1f finish=%s cache=%s%s%s",
          path.c_str(), st->stream ? "stream" : "json", c.slot_id, st->prompt_tokens, c.cached_tokens,
          c.prompt_evaluated, c.generated_tokens, c.prompt_ms,
          c.prompt_ms > 0 ? 1e3 * c.prompt_evaluated / c.prompt_ms : 0.0, c.predicted_ms,
          c.predicted_ms > 0 ? 1e3 * c.generated_tokens / c.predicted_ms : 0.0, total_ms,
          st->gen->FinishReason().c_str(), c.cache.source.c_str(), c.cache.reason.empty() ? "" : " ",
          c.cache.reason.c_str());
    }
  };

  if (!st->stream) {
    // Nothing is written until the end, so a hang-up is noticed by probing the connection between polls.
    ConnectionProbe probe(req.local_addr, req.local_port, req.remote_addr, req.remote_port);
    while (true) {
      GenerationChunk chunk;
      bool done = st->gen->Poll(std::chrono::milliseconds(200), &chunk);
      Accumulate(&st->total, std::move(chunk));
      if (done) break;
      if (probe.ClientGone()) {
        st->gen->Cancel();
        finish(/*client_gone=*/true);
        return;
      }
    }
    AwaitEndState(*st->gen);  // the body is the response's last event
    finish(false);
    const auto& c = st->gen->completion();
    if (c.finish_reason == "error") {
      return fail(c.error ? ApiError::FromError(*c.error) : ApiError::Internal("generation failed"));
    }
    return SendJson(res, 200, st->writer->Full(*st->gen, st->total));
  }

  metrics.CountStreamed();
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, st, finish](size_t, httplib::DataSink& sink) {
        if (st->finished) {
          sink.done();
          return true;
        }
        auto send = [&](const std::string& out) {
          if (out.empty()) return true;
          if (!sink.write(out.data(), out.size())) {
            st->gen->Cancel();
            st->finished = true;
            finish(/*client_gone=*/true);
            return false;
          }
          st->last_write = Clock::now();
          return true;
        };
        std::string out;
        if (!st->started) {
          out = st->writer->StreamStart(*st->gen);
          st->started = true;
        }
        GenerationChunk chunk;
        bool done = st->gen->Poll(std::chrono::milliseconds(100), &chunk);
        out += st->writer->StreamChunk(*st->gen, chunk);
        if (done) {  // the text goes out now; the last event (finish reason, usage, [DONE]) after the end state
          if (!send(out)) return false;
          AwaitEndState(*st->gen);
          out = st->writer->StreamEnd(*st->gen);
        }
        // A comment line now and then: SSE clients ignore it, and a failed write tells us the client is gone
        // even while the prompt is still being evaluated.
        if (!done && out.empty() && MsSince(st->last_write) > 1000) out = ": keep-alive\n\n";
        if (!send(out)) return false;
        if (done) {
          st->finished = true;
          finish(false);
          sink.done();
        }
        return true;
      },
      [st, finish](bool success) {
        if (!st->finished) {  // the connection failed before the end (httplib saw it first)
          st->gen->Cancel();
          st->finished = true;
          finish(/*client_gone=*/true);
        }
        (void)success;
      });
}

}  // namespace rw::server
