// Anthropic Messages API: POST /v1/messages (plain and streaming) and POST /v1/messages/count_tokens, on the
// same engine, cache and reports as the OpenAI endpoints. Request conversion: anthropic_convert.h.
#include <map>
#include <optional>

#include "server/anthropic_convert.h"
#include "server/responses.h"
#include "server/server_impl.h"

namespace rw::server {

using nlohmann::json;

namespace {

json AnthropicUsage(int32_t prompt_tokens, int32_t cached, int32_t output_tokens) {
  return {{"input_tokens", prompt_tokens - cached},
          {"cache_creation_input_tokens", 0},
          {"cache_read_input_tokens", cached},
          {"output_tokens", output_tokens}};
}

// Content blocks in order: thinking, text, tool_use (each kind opened when its first text arrives; a switch
// of kind closes the open block).
class AnthropicWriter : public ResponseWriter {
 public:
  AnthropicWriter(std::string model, int32_t prompt_tokens)
      : model_(std::move(model)), prompt_tokens_(prompt_tokens), id_(RandomId("msg_")) {}

  std::string StreamStart(const Generation&) override {
    json message = {{"id", id_},
                    {"type", "message"},
                    {"role", "assistant"},
                    {"model", model_},
                    {"content", json::array()},
                    {"stop_reason", nullptr},
                    {"stop_sequence", nullptr},
                    {"usage", AnthropicUsage(prompt_tokens_, 0, 0)}};
    return NamedSse("message_start", {{"type", "message_start"}, {"message", message}});
  }

  std::string StreamChunk(const Generation&, const GenerationChunk& c) override {
    std::string out;
    if (!c.delta.reasoning.empty()) {
      out += Open("thinking", {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}});
      out += Delta({{"type", "thinking_delta"}, {"thinking", c.delta.reasoning}});
    }
    if (!c.delta.content.empty()) {
      out += Open("text", {{"type", "text"}, {"text", ""}});
      out += Delta({{"type", "text_delta"}, {"text", c.delta.content}});
    }
    for (const auto& call : c.delta.tool_calls) {
      if (!call.name.empty()) {
        out += Close();
        out += Open(
            "tool_use:" + std::to_string(call.index),
            {{"type", "tool_use"}, {"id", ToolId(call)}, {"name", call.name}, {"input", json::object()}});
      }
      if (!call.arguments.empty())
        out += Delta({{"type", "input_json_delta"}, {"partial_json", call.arguments}});
    }
    return out;
  }

  std::string StreamEnd(const Generation& g) override {
    const auto& c = g.completion();
    std::string out = Close();
    if (c.finish_reason == "error") {
      ApiError e = c.error ? ApiError::FromError(*c.error) : ApiError::Internal("generation failed");
      return out + NamedSse("error", AnthropicErrorJson(e));
    }
    json delta = {{"stop_reason", AnthropicStopReason(g.FinishReason(), !g.matched_stop().empty())},
                  {"stop_sequence", g.matched_stop().empty() ? json(nullptr) : json(g.matched_stop())}};
    json usage = AnthropicUsage(prompt_tokens_, c.cached_tokens, g.accepted_tokens());
    out += NamedSse("message_delta", {{"type", "message_delta"}, {"delta", delta}, {"usage", usage}});
    out += NamedSse("message_stop", {{"type", "message_stop"}});
    return out;
  }

  json Full(const Generation& g, const GenerationChunk& total) override {
    const auto& c = g.completion();
    const ParsedDelta& d = total.delta;
    json content = json::array();
    if (!d.reasoning.empty())
      content.push_back({{"type", "thinking"}, {"thinking", d.reasoning}, {"signature", ""}});
    if (!d.content.empty()) content.push_back({{"type", "text"}, {"text", d.content}});
    for (const auto& call : d.tool_calls) {
      json input = json::parse(call.arguments, nullptr, false);
      if (!input.is_object()) input = json::object();
      content.push_back({{"type", "tool_use"}, {"id", ToolId(call)}, {"name", call.name}, {"input", input}});
    }
    return {{"id", id_},
            {"type", "message"},
            {"role", "assistant"},
            {"model", model_},
            {"content", std::move(content)},
            {"stop_reason", AnthropicStopReason(g.FinishReason(), !g.matched_stop().empty())},
            {"stop_sequence", g.matched_stop().empty() ? json(nullptr) : json(g.matched_stop())},
            {"usage", AnthropicUsage(prompt_tokens_, c.cached_tokens, g.accepted_tokens())},
            {"timings", TimingsJson(c)},
            {"cache", CacheReportJson(c.cache)}};
  }

  json ErrorBody(const ApiError& e) const override { return AnthropicErrorJson(e); }

 private:
  std::string ToolId(const ToolCall& call) {
    auto it = tool_ids_.find(call.index);
    if (it != tool_ids_.end()) return it->second;
    std::string id = RandomId("toolu_");  // Anthropic's id form, whatever the parser named the call
    tool_ids_[call.index] = id;
    return id;
  }
  // Opens a block of `kind` unless it is the open one (closing the open one first).
  std::string Open(const std::string& kind, json block) {
    if (open_ == kind) return "";
    std::string out = Close();
    open_ = kind;
    out +=
        NamedSse("content_block_start",
                 {{"type", "content_block_start"}, {"index", index_}, {"content_block", std::move(block)}});
    return out;
  }
  std::string Delta(json delta) {
    return NamedSse("content_block_delta",
                    {{"type", "content_block_delta"}, {"index", index_}, {"delta", std::move(delta)}});
  }
  std::string Close() {
    if (open_.empty()) return "";
    std::string out;
    if (open_ == "thinking")  // clients keep the signature to send the block back; ours is empty
      out += Delta({{"type", "signature_delta"}, {"signature", ""}});
    out += NamedSse("content_block_stop", {{"type", "content_block_stop"}, {"index", index_}});
    open_.clear();
    ++index_;
    return out;
  }

  std::string model_;
  int32_t prompt_tokens_;
  std::string id_;
  std::string open_;  // kind of the open block ("" = none)
  int index_ = 0;     // index of the open (or next) block
  std::map<int, std::string> tool_ids_;
};

}  // namespace

namespace {

// The request body as an Anthropic request, or false after answering with the error.
bool ParseAnthropic(const httplib::Request& req, httplib::Response& res, bool count_tokens,
                    const ParseOptions& options, std::optional<AnthropicRequest>* out) {
  auto body = ParseJsonBody(req.body, options.limits);
  ParseResult<AnthropicRequest> parsed = ApiError::BadRequest("");
  if (auto* e = std::get_if<ApiError>(&body)) {
    parsed = *e;
  } else {
    parsed = ParseAnthropicRequest(std::get<nlohmann::ordered_json>(body), count_tokens, options);
  }
  if (auto* e = std::get_if<ApiError>(&parsed)) {
    Server::Impl::SendJson(res, e->status, AnthropicErrorJson(*e));
    return false;
  }
  *out = std::move(std::get<AnthropicRequest>(parsed));
  return true;
}

}  // namespace

void Server::Impl::HandleAnthropicMessages(const httplib::Request& req, httplib::Response& res) {
  std::optional<AnthropicRequest> r;
  if (!ParseAnthropic(req, res, /*count_tokens=*/false, parse_options, &r)) return;
  bool has_system = !r->chat.messages.empty() && r->chat.messages[0]["role"] == "system";
  auto hints = [&](const RenderedChat& rc) {
    return BreakpointOffsets(r->breakpoints, rc.prompt, rc.message_offsets, rc.generation_offset, has_system);
  };
  auto prepared = PrepareChat(r->chat, hints);
  if (auto* e = std::get_if<ApiError>(&prepared)) return SendJson(res, e->status, AnthropicErrorJson(*e));
  PreparedGeneration& p = std::get<PreparedGeneration>(prepared);
  p.writer = std::make_unique<AnthropicWriter>(config.model_name, static_cast<int32_t>(p.prompt.size()));
  RunGeneration(req, res, std::move(p));
}

void Server::Impl::HandleAnthropicCountTokens(const httplib::Request& req, httplib::Response& res) {
  std::optional<AnthropicRequest> r;
  if (!ParseAnthropic(req, res, /*count_tokens=*/true, parse_options, &r)) return;
  auto prepared = PrepareChat(r->chat, nullptr);
  if (auto* e = std::get_if<ApiError>(&prepared)) return SendJson(res, e->status, AnthropicErrorJson(*e));
  SendJson(res, 200, {{"input_tokens", std::get<PreparedGeneration>(prepared).prompt.size()}});
}

}  // namespace rw::server
