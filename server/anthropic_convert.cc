#include "server/anthropic_convert.h"

#include <algorithm>

#include "server/agent_shapes.h"

namespace rw::server {
namespace {

using json = nlohmann::ordered_json;

bool HasCacheControl(const json& block) {
  return block.is_object() && block.contains("cache_control") && block["cache_control"].is_object();
}

// Claude Code stamps its system prompt with a per-request checksum ("x-anthropic-billing-header: ...;
// cch=ab12f;"), which would end every cached prefix at the first bytes. The stamp is replaced by a constant.
void NormalizeBillingHeader(std::string* text) {
  if (text->rfind("x-anthropic-billing-header:", 0) != 0) return;
  size_t cch = text->find("cch=");
  size_t semi = cch == std::string::npos ? cch : text->find(';', cch);
  if (semi == std::string::npos) return;
  for (size_t i = cch + 4; i < semi; ++i) (*text)[i] = '0';
}

ParseResult<std::string> SearchResultText(const json& b, const std::string& where);

// Whether a tool_result in `messages` holds a tool_reference block naming `name` (tool search loaded it).
bool ReferencesTool(const json& messages, const std::string& name) {
  for (const auto& m : messages) {
    if (!m.is_object() || !m.contains("content") || !m["content"].is_array()) continue;
    for (const auto& b : m["content"]) {
      if (!b.is_object() || !b.contains("content") || !b["content"].is_array()) continue;
      for (const auto& r : b["content"]) {
        if (r.is_object() && StringField(r, "type", "") == "tool_reference" && StringField(r, "tool_name", "") == name)
          return true;
      }
    }
  }
  return false;
}

// The text of a content value: a string or an array of blocks (text and search_result blocks).
ParseResult<std::string> BlocksText(const json& v, const std::string& where) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return std::string();
  if (!v.is_array())
    return ApiError::BadRequest("'" + where + "' must be a string or an array of blocks", where);
  std::string out;
  for (const auto& b : v) {
    if (!b.is_object()) return ApiError::BadRequest("'" + where + "' blocks must be objects", where);
    std::string type = StringField(b, "type", "");
    if (type == "text") {
      if (!b.contains("text") || !b["text"].is_string())
        return ApiError::BadRequest("a text block in '" + where + "' needs a string 'text'", where);
      if (!out.empty()) out += "\n";
      out += b["text"].get<std::string>();
    } else if (type == "tool_reference") {
      // Tool search's answer (a deferred tool is now loaded; it is offered from then on, see the tools).
      if (!out.empty()) out += "\n";
      out += "Tool loaded: " + StringField(b, "tool_name", "");
    } else if (type == "search_result") {
      auto t = SearchResultText(b, where);
      if (auto* e = std::get_if<ApiError>(&t)) return *e;
      if (!out.empty()) out += "\n";
      out += std::get<std::string>(t);
    } else if (type == "image" || type == "document") {
      return ApiError::Unsupported("'" + type + "' blocks are not supported (text only)", where);
    } else if (std::string why = AnthropicUnrenderableBlock(type); !why.empty()) {
      return ApiError::BadRequest(why + " (in '" + where + "')", where);
    } else {
      return ApiError::BadRequest("unknown block type '" + type + "' in '" + where + "'", where);
    }
  }
  return out;
}

// A search_result block (a user message's or a tool result's) as text: its title, source and text content.
ParseResult<std::string> SearchResultText(const json& b, const std::string& where) {
  if (!b.contains("content") || !b["content"].is_array())
    return ApiError::BadRequest("a search_result block in '" + where + "' needs a 'content' array", where);
  std::string out = StringField(b, "title", "");
  const std::string source = StringField(b, "source", "");
  if (!source.empty()) out += (out.empty() ? "" : "\n") + source;
  for (const auto& c : b["content"]) {
    if (!c.is_object() || StringField(c, "type", "") != "text" || !c.contains("text") || !c["text"].is_string())
      return ApiError::BadRequest("a search_result block in '" + where + "' holds text blocks only", where);
    out += (out.empty() ? "" : "\n") + c["text"].get<std::string>();
  }
  return out;
}

template <typename T>
const ApiError* ErrorOf(const ParseResult<T>& r) {
  return std::get_if<ApiError>(&r);
}

// An Anthropic image block as an OpenAI image_url part with a data: URI (server/image_prompt.cc decodes it). Only
// base64 sources: a url source is refused, since the server never fetches remote images.
ParseResult<json> AnthropicImagePart(const json& b, const std::string& where) {
  const json* src = b.contains("source") && b["source"].is_object() ? &b["source"] : nullptr;
  if (src == nullptr) return ApiError::BadRequest("an image block in '" + where + "' needs a 'source' object", where);
  const std::string type = StringField(*src, "type", "");
  if (type == "url")
    return ApiError::BadRequest("image sources of type 'url' are not fetched by this server; send the image as a "
                                "base64 source",
                                where);
  if (type != "base64")
    return ApiError::BadRequest("image source type '" + type + "' is not supported (base64 only)", where);
  const std::string media = StringField(*src, "media_type", "");
  if (!src->contains("data") || !(*src)["data"].is_string())
    return ApiError::BadRequest("a base64 image source in '" + where + "' needs a string 'data'", where);
  return json{{"type", "image_url"},
              {"image_url", {{"url", "data:" + media + ";base64," + (*src)["data"].get<std::string>()}}}};
}

struct Converter {
  json messages = json::array();
  std::vector<CacheBreakpoint> breakpoints;

  void Mark(const json& block, const std::string& text) {
    if (HasCacheControl(block)) breakpoints.push_back({static_cast<int>(messages.size()), text});
  }

  std::optional<ApiError> System(const json& system) {
    std::string text;
    bool marked = false;
    if (system.is_string()) {
      text = system.get<std::string>();
    } else if (system.is_array()) {
      for (const auto& b : system) {
        auto t = BlocksText(json::array({b}), "system");
        if (auto* e = ErrorOf(t)) return *e;
        std::string piece = std::get<std::string>(t);
        NormalizeBillingHeader(&piece);
        if (!text.empty()) text += "\n";
        text += piece;
        if (HasCacheControl(b)) {
          breakpoints.push_back({static_cast<int>(messages.size()), piece});
          marked = true;
        }
      }
    } else {
      return ApiError::BadRequest("'system' must be a string or an array of text blocks", "system");
    }
    (void)marked;
    NormalizeBillingHeader(&text);
    messages.push_back({{"role", "system"}, {"content", text}});
    return std::nullopt;
  }

  // A system message inside `messages` (Claude Code sends its environment block so): a system message in place,
  // its text blocks joined as the top-level system's are, so a string and the same text as blocks render alike.
  std::optional<ApiError> SystemMessage(const json& m, const std::string& w) {
    if (!m.contains("content")) return ApiError::BadRequest("'" + w + ".content' is required", w);
    auto t = BlocksText(m["content"], w + ".content");
    if (auto* e = ErrorOf(t)) return *e;
    if (m["content"].is_array()) {
      for (const auto& b : m["content"]) {
        if (HasCacheControl(b)) breakpoints.push_back({static_cast<int>(messages.size()), ""});
      }
    }
    messages.push_back({{"role", "system"}, {"content", std::get<std::string>(t)}});
    return std::nullopt;
  }

  std::optional<ApiError> Message(const json& m, size_t i) {
    std::string w = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return ApiError::BadRequest("'" + w + "' must be an object", w);
    std::string role = m.contains("role") && m["role"].is_string() ? m["role"].get<std::string>() : "";
    if (role == "system") return SystemMessage(m, w);
    if (role != "user" && role != "assistant")
      return ApiError::BadRequest("'" + w + ".role' must be user, assistant or system", w);
    if (!m.contains("content")) return ApiError::BadRequest("'" + w + ".content' is required", w);
    const json& content = m["content"];
    if (content.is_string()) {
      messages.push_back({{"role", role}, {"content", content}});
      return std::nullopt;
    }
    if (!content.is_array()) return ApiError::BadRequest("'" + w + ".content' must be a string or blocks", w);
    json text_parts = json::array(), tool_calls = json::array(), tool_results = json::array();
    std::string reasoning, last_text;
    bool mark_end = false;
    std::vector<std::string> marked_texts;
    for (const auto& b : content) {
      if (!b.is_object()) return ApiError::BadRequest("'" + w + ".content' blocks must be objects", w);
      std::string type = StringField(b, "type", "");
      if (type == "text") {
        auto t = BlocksText(json::array({b}), w + ".content");
        if (auto* e = ErrorOf(t)) return *e;
        text_parts.push_back({{"type", "text"}, {"text", std::get<std::string>(t)}});
        if (HasCacheControl(b)) marked_texts.push_back(std::get<std::string>(t));
      } else if (type == "thinking" && role == "assistant") {
        if (b.contains("thinking") && b["thinking"].is_string())
          reasoning += b["thinking"].get<std::string>();
      } else if (type == "redacted_thinking" && role == "assistant") {
        // Opaque to us: nothing to render.
      } else if (type == "tool_use" && role == "assistant") {
        if (!b.contains("name") || !b["name"].is_string())
          return ApiError::BadRequest("a tool_use block in '" + w + "' needs a 'name'", w);
        json input = b.contains("input") && b["input"].is_object() ? b["input"] : json::object();
        json call = {{"type", "function"}, {"function", {{"name", b["name"]}, {"arguments", input}}}};
        if (b.contains("id") && b["id"].is_string()) call["id"] = b["id"];
        tool_calls.push_back(std::move(call));
        mark_end = mark_end || HasCacheControl(b);
      } else if (type == "tool_result" && role == "user") {
        auto t = BlocksText(b.contains("content") ? b["content"] : json(""), w + ".content.tool_result");
        if (auto* e = ErrorOf(t)) return *e;
        std::string text = std::get<std::string>(t);
        if ((b.contains("is_error") && b["is_error"] == true) && text.rfind("Error", 0) != 0)
          text = "Error: " + text;
        json msg = {{"role", "tool"}, {"content", text}};
        if (b.contains("tool_use_id") && b["tool_use_id"].is_string()) msg["tool_call_id"] = b["tool_use_id"];
        tool_results.push_back({std::move(msg), HasCacheControl(b)});
      } else if (type == "search_result" && role == "user") {
        auto t = SearchResultText(b, w + ".content");
        if (auto* e = ErrorOf(t)) return *e;
        text_parts.push_back({{"type", "text"}, {"text", std::get<std::string>(t)}});
      } else if (type == "image" && role == "user") {
        auto part = AnthropicImagePart(b, w);
        if (auto* e = ErrorOf(part)) return *e;
        text_parts.push_back(std::get<json>(part));
      } else if (type == "image" || type == "document") {
        return ApiError::Unsupported("'" + type + "' blocks are not supported here (images in user messages only)", w);
      } else if (std::string why = AnthropicUnrenderableBlock(type); !why.empty()) {
        return ApiError::BadRequest(why + " (in '" + w + "')", w);
      } else {
        return ApiError::BadRequest("block type '" + type + "' is not valid in a " + role + " message", w);
      }
    }
    // Tool results answer the previous assistant turn, so they come first (as tool messages).
    for (const auto& tr : tool_results) {
      if (tr[1].get<bool>()) breakpoints.push_back({static_cast<int>(messages.size()), ""});
      messages.push_back(tr[0]);
    }
    if (!text_parts.empty() || !tool_calls.empty() || !reasoning.empty()) {
      for (const auto& t : marked_texts) breakpoints.push_back({static_cast<int>(messages.size()), t});
      if (mark_end) breakpoints.push_back({static_cast<int>(messages.size()), ""});
      json msg = {{"role", role}};
      msg["content"] = text_parts.empty() ? json("") : text_parts;
      if (!tool_calls.empty()) msg["tool_calls"] = std::move(tool_calls);
      if (!reasoning.empty()) msg["reasoning_content"] = reasoning;
      messages.push_back(std::move(msg));
    }
    return std::nullopt;
  }
};

}  // namespace

ParseResult<AnthropicRequest> ParseAnthropicRequest(const json& body, bool count_tokens,
                                                    const ParseOptions& options) {
  AnthropicRequest out;
  Converter conv;
  LogIgnoredFieldsOnce(body, kAnthropicKnownFields, "/v1/messages");
  json oai = json::object();
  if (body.contains("model")) oai["model"] = body["model"];
  if (body.contains("system") && !body["system"].is_null()) {
    if (auto e = conv.System(body["system"])) return *e;
  }
  const json* msgs = body.contains("messages") ? &body["messages"] : nullptr;
  if (!msgs || !msgs->is_array()) return ApiError::BadRequest("'messages' must be an array", "messages");
  if (msgs->empty()) return ApiError::BadRequest("'messages' must not be empty", "messages");
  for (size_t i = 0; i < msgs->size(); ++i) {
    if (auto e = conv.Message((*msgs)[i], i)) return *e;
  }
  oai["messages"] = conv.messages;
  if (body.contains("tools") && !body["tools"].is_null()) {
    if (!body["tools"].is_array()) return ApiError::BadRequest("'tools' must be an array", "tools");
    json tools = json::array();
    bool mark_tools = false;
    for (const auto& t : body["tools"]) {
      if (!t.is_object() || !t.contains("name") || !t["name"].is_string())
        return ApiError::BadRequest("each tool needs a 'name'", "tools");
      if (t.contains("type") && t["type"].is_string() && t["type"] != "custom") {
        return ApiError::Unsupported("server tool '" + t["type"].get<std::string>() + "' is not supported",
                                     "tools");
      }
      if (t.contains("defer_loading") && t["defer_loading"] == true &&
          !ReferencesTool(*msgs, t["name"].get<std::string>())) {
        // Loaded on demand through tool search on Anthropic's side: not in the model's context until then.
        LogOnce("/v1/messages: tools with defer_loading are not offered to the model (e.g. '" +
                t["name"].get<std::string>() + "')");
        continue;
      }
      json fn = {{"name", t["name"]}};
      if (t.contains("description") && t["description"].is_string()) fn["description"] = t["description"];
      fn["parameters"] =
          t.contains("input_schema") && t["input_schema"].is_object() ? t["input_schema"] : json::object();
      tools.push_back({{"type", "function"}, {"function", std::move(fn)}});
      mark_tools = mark_tools || HasCacheControl(t);
    }
    if (!tools.empty()) oai["tools"] = std::move(tools);
    if (mark_tools) conv.breakpoints.push_back({-1, ""});
  }
  if (body.contains("tool_choice") && body["tool_choice"].is_object()) {
    const json& tc = body["tool_choice"];
    std::string type = StringField(tc, "type", "auto");
    if (type == "any") {
      oai["tool_choice"] = "required";
    } else if (type == "tool") {
      oai["tool_choice"] = {{"type", "function"}, {"function", {{"name", StringField(tc, "name", "")}}}};
    } else if (type == "none" || type == "auto") {
      oai["tool_choice"] = type;
    } else {
      return ApiError::BadRequest("'tool_choice.type' must be auto, any, tool or none", "tool_choice");
    }
  }
  if (!count_tokens) {
    if (!body.contains("max_tokens")) return ApiError::BadRequest("'max_tokens' is required", "max_tokens");
    oai["max_tokens"] = body["max_tokens"];
  }
  if (body.contains("stop_sequences")) oai["stop"] = body["stop_sequences"];
  for (const char* key : {"temperature", "top_p", "top_k", "stream", "chat_template_kwargs"}) {
    if (body.contains(key)) oai[key] = body[key];
  }
  if (body.contains("thinking") && body["thinking"].is_object()) {
    std::string type = StringField(body["thinking"], "type", "");
    if (type != "enabled" && type != "disabled" && type != "adaptive")
      return ApiError::BadRequest("'thinking.type' must be enabled or disabled", "thinking");
    if (!oai.contains("chat_template_kwargs") || !oai["chat_template_kwargs"].is_object())
      oai["chat_template_kwargs"] = json::object();
    oai["chat_template_kwargs"]["enable_thinking"] = type != "disabled";
    const json& budget =
        body["thinking"].contains("budget_tokens") ? body["thinking"]["budget_tokens"] : json();
    if (type == "enabled" && budget.is_number_integer()) oai["thinking_budget_tokens"] = budget;
  }
  auto chat = ParseChatRequest(oai, options);
  if (auto* e = ErrorOf(chat)) return *e;
  out.chat = std::move(std::get<ChatRequest>(chat));
  out.breakpoints = std::move(conv.breakpoints);
  return out;
}

nlohmann::json AnthropicErrorJson(const ApiError& e) {
  std::string type = "invalid_request_error";
  if (e.status == 401) type = "authentication_error";
  if (e.status == 403) type = "permission_error";
  if (e.status == 404) type = "not_found_error";
  if (e.status == 413) type = "request_too_large";
  if (e.status == 429) type = "rate_limit_error";
  if (e.status == 503) type = "overloaded_error";
  if (e.status >= 500 && e.status != 503) type = "api_error";
  return {{"type", "error"}, {"error", {{"type", type}, {"message", e.message}}}};
}

std::string AnthropicStopReason(const std::string& finish_reason, bool stop_sequence) {
  if (finish_reason == "tool_calls") return "tool_use";
  if (finish_reason == "length") return "max_tokens";
  if (stop_sequence) return "stop_sequence";
  return "end_turn";
}

std::vector<size_t> BreakpointOffsets(const std::vector<CacheBreakpoint>& breakpoints,
                                      const std::string& prompt, const std::vector<size_t>& message_offsets,
                                      size_t generation_offset, bool has_system) {
  std::vector<size_t> out;
  auto span_end = [&](size_t m) {
    return m + 1 < message_offsets.size() ? message_offsets[m + 1] : generation_offset;
  };
  for (const auto& b : breakpoints) {
    if (b.message < 0) {  // the tools: rendered with the system turn, before the conversation
      if (!message_offsets.empty()) out.push_back(has_system ? span_end(0) : message_offsets[0]);
      continue;
    }
    size_t m = static_cast<size_t>(b.message);
    if (m >= message_offsets.size()) continue;
    size_t begin = message_offsets[m], end = std::min(span_end(m), prompt.size());
    size_t at = end;
    if (!b.text.empty() && end > begin) {
      size_t found = prompt.rfind(b.text, end - std::min(end, b.text.size()));
      if (found != std::string::npos && found >= begin && found + b.text.size() <= end)
        at = found + b.text.size();
    }
    out.push_back(at);
  }
  return out;
}

}  // namespace rw::server
