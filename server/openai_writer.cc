#include "server/openai_writer.h"

#include "server/responses.h"

namespace rw::server {

using nlohmann::json;

void Accumulate(GenerationChunk* total, GenerationChunk&& c) {
  total->delta.reasoning += c.delta.reasoning;
  total->delta.content += c.delta.content;
  for (auto& t : c.delta.tool_calls) {
    if (!t.name.empty() || total->delta.tool_calls.empty()) {
      total->delta.tool_calls.push_back(std::move(t));
    } else {
      for (auto& call : total->delta.tool_calls) {
        if (call.index == t.index) call.arguments += t.arguments;
      }
    }
  }
  for (auto& t : c.tokens) total->tokens.push_back(std::move(t));
}

std::string NamedSse(const std::string& event, const json& data) {
  return "event: " + event + "\ndata: " + DumpJson(data) + "\n\n";
}

namespace {

std::string Sse(const json& j) { return "data: " + DumpJson(j) + "\n\n"; }

class OpenAiWriter : public ResponseWriter {
 public:
  explicit OpenAiWriter(OpenAiWriterOptions o)
      : o_(std::move(o)), id_(RandomId(o_.chat ? "chatcmpl-" : "cmpl-")), created_(UnixTime()) {}

  std::string StreamChunk(const Generation&, const GenerationChunk& c) override {
    if (c.empty()) return "";
    json choice = {{"index", 0}, {"finish_reason", nullptr}};
    if (o_.chat) {
      json delta = json::object();
      if (!role_sent_) {
        delta["role"] = "assistant";
        role_sent_ = true;
      }
      if (!c.delta.reasoning.empty()) delta["reasoning_content"] = c.delta.reasoning;
      if (!c.delta.content.empty()) delta["content"] = c.delta.content;
      if (!c.delta.tool_calls.empty()) {
        json calls = json::array();
        for (const auto& call : c.delta.tool_calls) {
          if (call.name.empty()) {  // a later fragment: argument text only
            calls.push_back({{"index", call.index}, {"function", {{"arguments", call.arguments}}}});
          } else {
            calls.push_back(ToolCallJson(call, call.index, true));
          }
        }
        delta["tool_calls"] = std::move(calls);
      }
      choice["delta"] = std::move(delta);
      choice["logprobs"] = o_.logprobs && !c.tokens.empty() ? ChatLogprobsJson(c.tokens) : json(nullptr);
    } else {
      choice["text"] = c.delta.content;
      choice["logprobs"] =
          o_.logprobs && !c.tokens.empty() ? CompletionLogprobsJson(c.tokens, text_offset_) : json(nullptr);
      for (const auto& t : c.tokens) text_offset_ += t.piece.size();
    }
    json chunk = Base();
    chunk["choices"] = json::array({std::move(choice)});
    return Sse(chunk);
  }

  std::string StreamEnd(const Generation& g) override {
    const auto& c = g.completion();
    std::string out;
    if (c.finish_reason == "error") {
      ApiError e = c.error ? ApiError::FromError(*c.error) : ApiError::Internal("generation failed");
      out += Sse(e.ToJson());
    }
    json choice = {{"index", 0}, {"finish_reason", g.FinishReason()}, {"logprobs", nullptr}};
    if (o_.chat) {
      json delta = json::object();
      if (!role_sent_) delta["role"] = "assistant";
      choice["delta"] = std::move(delta);
    } else {
      choice["text"] = "";
    }
    json chunk = Base();
    chunk["choices"] = json::array({std::move(choice)});
    chunk["timings"] = TimingsJson(c);
    chunk["cache"] = CacheReportJson(c.cache);
    out += Sse(chunk);
    if (o_.include_usage) {
      json u = Base();
      u["choices"] = json::array();
      u["usage"] = Usage(g);
      u["timings"] = TimingsJson(c);
      out += Sse(u);
    }
    out += "data: [DONE]\n\n";
    return out;
  }

  json Full(const Generation& g, const GenerationChunk& total) override {
    const auto& c = g.completion();
    json choice = {{"index", 0}, {"finish_reason", g.FinishReason()}};
    const ParsedDelta& d = total.delta;
    if (o_.chat) {
      json msg = {{"role", "assistant"}};
      msg["content"] = d.content.empty() && !d.tool_calls.empty() ? json(nullptr) : json(d.content);
      if (!d.reasoning.empty()) msg["reasoning_content"] = d.reasoning;
      if (!d.tool_calls.empty()) {
        json calls = json::array();
        for (const auto& call : d.tool_calls) calls.push_back(ToolCallJson(call, 0, false));
        msg["tool_calls"] = std::move(calls);
      }
      choice["message"] = std::move(msg);
      choice["logprobs"] = o_.logprobs ? ChatLogprobsJson(total.tokens) : json(nullptr);
    } else {
      choice["text"] = d.content;
      choice["logprobs"] = o_.logprobs ? CompletionLogprobsJson(total.tokens, 0) : json(nullptr);
    }
    json out = Base();
    out["object"] = o_.chat ? "chat.completion" : "text_completion";
    out["choices"] = json::array({std::move(choice)});
    out["usage"] = Usage(g);
    out["timings"] = TimingsJson(c);
    out["cache"] = CacheReportJson(c.cache);
    return out;
  }

 private:
  json Base() const {
    return {{"id", id_},
            {"object", o_.chat ? "chat.completion.chunk" : "text_completion"},
            {"created", created_},
            {"model", o_.model}};
  }
  json Usage(const Generation& g) const {
    return UsageJson(o_.prompt_tokens, g.accepted_tokens(), g.completion().cached_tokens);
  }

  OpenAiWriterOptions o_;
  std::string id_;
  int64_t created_;
  bool role_sent_ = false;
  size_t text_offset_ = 0;
};

// llama-server's POST /completion: {"content", "stop", ...}; streamed as data-only events, no [DONE].
class LlamaCompletionWriter : public ResponseWriter {
 public:
  LlamaCompletionWriter(std::string model, int32_t prompt_tokens, int32_t n_ctx, bool probs)
      : model_(std::move(model)), prompt_tokens_(prompt_tokens), n_ctx_(n_ctx), probs_(probs) {}

  std::string StreamChunk(const Generation& g, const GenerationChunk& c) override {
    if (c.empty()) return "";
    (void)g;
    json j = {{"content", c.delta.content}, {"stop", false}, {"index", 0}};
    if (probs_ && !c.tokens.empty()) j["completion_probabilities"] = LlamaProbabilitiesJson(c.tokens);
    return Sse(j);
  }
  std::string StreamEnd(const Generation& g) override {
    const auto& c = g.completion();
    if (c.finish_reason == "error") {
      ApiError e = c.error ? ApiError::FromError(*c.error) : ApiError::Internal("generation failed");
      return Sse(e.ToJson());
    }
    json j = Final(g);
    j["content"] = "";
    return Sse(j);
  }
  json Full(const Generation& g, const GenerationChunk& total) override {
    json j = Final(g);
    j["content"] = total.delta.content;
    if (probs_) j["completion_probabilities"] = LlamaProbabilitiesJson(total.tokens);
    return j;
  }

 private:
  json Final(const Generation& g) const {
    const auto& c = g.completion();
    std::string reason = g.FinishReason();
    std::string stop_type = !g.matched_stop().empty() ? "word" : reason == "length" ? "limit" : "eos";
    return {{"index", 0},
            {"stop", true},
            {"model", model_},
            {"id_slot", c.slot_id},
            {"tokens_predicted", g.accepted_tokens()},
            {"tokens_evaluated", prompt_tokens_},
            {"tokens_cached", c.cached_tokens},
            {"stop_type", stop_type},
            {"stopping_word", g.matched_stop()},
            // llama-server: the context filled up before the answer ended (rewind never cuts a prompt: one
            // that does not fit is refused with a 400).
            {"truncated", reason == "length" && n_ctx_ > 0 && c.prompt_tokens + c.generated_tokens >= n_ctx_},
            {"timings", TimingsJson(c)},
            {"cache", CacheReportJson(c.cache)}};
  }
  std::string model_;
  int32_t prompt_tokens_;
  int32_t n_ctx_;
  bool probs_;  // n_probs / logprobs asked: completion_probabilities
};

}  // namespace

std::unique_ptr<ResponseWriter> NewOpenAiWriter(OpenAiWriterOptions options) {
  return std::make_unique<OpenAiWriter>(std::move(options));
}

std::unique_ptr<ResponseWriter> NewLlamaCompletionWriter(std::string model, int32_t prompt_tokens, int32_t n_ctx,
                                                         bool probs) {
  return std::make_unique<LlamaCompletionWriter>(std::move(model), prompt_tokens, n_ctx, probs);
}

}  // namespace rw::server
