// OpenAI Responses API: POST /v1/responses (plain and streaming response.* events) on the same engine, cache
// and reports as the chat endpoint. The request becomes chat messages:
//   instructions                       -> a system message (not carried over to later responses)
//   input: string | items              -> message items (input_text / output_text parts), function_call items
//                                         (an assistant turn's tool_calls), function_call_output items (tool
//                                         messages), reasoning items (the next assistant turn's reasoning)
//   tools [{type: function, name, ...}] -> function tools; namespace tools flattened, hosted tools left out
//                                         (server/agent_shapes.h); tool_choice, max_output_tokens, temperature, top_p
//   previous_response_id               -> the stored conversation of that response, then this input
// Answered conversations are kept in memory (ResponseStore: bounded count, bytes and age), each readable only
// with the API key that created it.
#include "server/responses_api.h"

#include <map>

#include "base/log.h"
#include "server/agent_shapes.h"
#include "server/responses.h"
#include "server/server_impl.h"

namespace rw::server {

using nlohmann::json;
using ojson = nlohmann::ordered_json;

namespace {

ApiError Bad(const std::string& message, const std::string& param) {
  return ApiError::BadRequest(message, param);
}

// Text of a message item's content: a string or input_text / output_text parts.
ParseResult<std::string> ItemText(const ojson& content, const std::string& where) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) return Bad("'" + where + "' must be a string or an array of parts", where);
  std::string out;
  for (const auto& p : content) {
    std::string type = p.is_object() ? StringField(p, "type", "") : "";
    if (type == "input_text" || type == "output_text" || type == "text") {
      if (!p.contains("text") || !p["text"].is_string()) return Bad("a text part needs 'text'", where);
      out += p["text"].get<std::string>();
    } else if (type == "input_image" || type == "input_file" || type == "input_audio") {
      return ApiError::Unsupported("'" + type + "' parts are not supported here (input_image in user messages only)",
                                   where);
    } else if (type != "refusal") {
      return Bad("unknown content part type '" + type + "'", where);
    }
  }
  return out;
}

// A user message's content with input_image parts, as OpenAI chat parts (text, image_url with the data: URI;
// server/image_prompt.cc decodes it). Null when the content has no image (ItemText applies).
ParseResult<ojson> UserImageParts(const ojson& content, const std::string& where) {
  bool any = false;
  if (content.is_array())
    for (const auto& p : content) any = any || (p.is_object() && StringField(p, "type", "") == "input_image");
  if (!any) return ojson(nullptr);
  ojson parts = ojson::array();
  for (const auto& p : content) {
    const std::string type = p.is_object() ? StringField(p, "type", "") : "";
    if (type == "input_image") {
      if (!p.contains("image_url") || !p["image_url"].is_string())
        return Bad("an input_image part needs 'image_url' (a data: URI; file_id is not supported)", where);
      parts.push_back({{"type", "image_url"}, {"image_url", {{"url", p["image_url"]}}}});
    } else {
      auto text = ItemText(ojson::array({p}), where);
      if (auto* e = std::get_if<ApiError>(&text)) return *e;
      parts.push_back({{"type", "text"}, {"text", std::get<std::string>(text)}});
    }
  }
  return parts;
}

// Appends input items to `messages` (chat form).
std::optional<ApiError> AppendItems(const ojson& input, ojson* messages) {
  if (input.is_string()) {
    messages->push_back({{"role", "user"}, {"content", input}});
    return std::nullopt;
  }
  if (!input.is_array()) return Bad("'input' must be a string or an array of items", "input");
  std::string reasoning;
  auto assistant_turn = [&]() -> ojson& {
    // function_call items join the assistant message right before them (or start one).
    if (messages->empty() || (*messages).back()["role"] != "assistant") {
      messages->push_back({{"role", "assistant"}, {"content", ""}});
    }
    ojson& m = messages->back();
    if (!reasoning.empty()) {
      m["reasoning_content"] = reasoning;
      reasoning.clear();
    }
    return m;
  };
  for (size_t i = 0; i < input.size(); ++i) {
    const ojson& item = input[i];
    std::string w = "input[" + std::to_string(i) + "]";
    if (!item.is_object()) return Bad("'" + w + "' must be an object", w);
    std::string type = StringField(item, "type", "message");
    if (type == "message") {
      std::string role = StringField(item, "role", "");
      if (role == "developer") role = "system";
      if (role != "user" && role != "assistant" && role != "system")
        return Bad("'" + w + ".role' must be user, assistant, system or developer", w);
      if (role == "user") {
        auto parts = UserImageParts(item.contains("content") ? item["content"] : ojson(""), w + ".content");
        if (auto* e = std::get_if<ApiError>(&parts)) return *e;
        if (!std::get<ojson>(parts).is_null()) {
          messages->push_back({{"role", role}, {"content", std::get<ojson>(parts)}});
          continue;
        }
      }
      auto text = ItemText(item.contains("content") ? item["content"] : ojson(""), w + ".content");
      if (auto* e = std::get_if<ApiError>(&text)) return *e;
      if (role == "assistant") {
        ojson& m = assistant_turn();
        std::string prev = m["content"].is_string() ? m["content"].get<std::string>() : "";
        m["content"] = prev + std::get<std::string>(text);
      } else {
        messages->push_back({{"role", role}, {"content", std::get<std::string>(text)}});
      }
    } else if (type == "function_call") {
      if (!item.contains("name") || !item["name"].is_string()) return Bad("'" + w + ".name' is required", w);
      // A call of a namespace tool comes back with its namespace (Codex): the model saw the qualified name.
      std::string name = item["name"].get<std::string>();
      if (item.contains("namespace") && item["namespace"].is_string() && !item["namespace"].get<std::string>().empty())
        name = QualifiedToolName(item["namespace"].get<std::string>(), name);
      std::string args = item.contains("arguments") && item["arguments"].is_string()
                             ? item["arguments"].get<std::string>()
                             : "{}";
      ojson call = {{"type", "function"}, {"function", {{"name", name}, {"arguments", args}}}};
      if (item.contains("call_id") && item["call_id"].is_string()) call["id"] = item["call_id"];
      ojson& m = assistant_turn();
      if (!m.contains("tool_calls")) m["tool_calls"] = ojson::array();
      m["tool_calls"].push_back(std::move(call));
    } else if (type == "function_call_output") {
      std::string out;
      if (item.contains("output") && item["output"].is_string()) {
        out = item["output"].get<std::string>();
      } else if (item.contains("output")) {
        auto text = ItemText(item["output"], w + ".output");
        if (auto* e = std::get_if<ApiError>(&text)) return *e;
        out = std::get<std::string>(text);
      }
      ojson msg = {{"role", "tool"}, {"content", out}};
      if (item.contains("call_id") && item["call_id"].is_string()) msg["tool_call_id"] = item["call_id"];
      messages->push_back(std::move(msg));
    } else if (type == "reasoning") {
      for (const char* key : {"content", "summary"}) {
        if (!item.contains(key) || !item[key].is_array()) continue;
        for (const auto& p : item[key]) {
          if (p.is_object() && p.contains("text") && p["text"].is_string())
            reasoning += p["text"].get<std::string>();
        }
        if (!reasoning.empty()) break;
      }
    } else if (type == "item_reference") {
      return ApiError::Unsupported("'item_reference' items are not supported", w);
    } else {
      return Bad("unknown input item type '" + type + "'", w);
    }
  }
  return std::nullopt;
}

// The fields of a Responses request this server reads or knowingly ignores: include (reasoning.encrypted_content:
// there is none to give), store, prompt_cache_key (the replicas' affinity key, deploy/haproxy.cfg; one server
// finds a cached prefix by its tokens), metadata, client_metadata, context_management, parallel_tool_calls,
// truncation, user, safety_identifier, service_tier, prompt_cache_retention, max_tool_calls, background,
// stream_options, top_logprobs. Others are logged once (LogIgnoredFieldsOnce).
const std::set<std::string_view> kKnownFields = {
    "model", "input", "instructions", "tools", "tool_choice", "max_output_tokens", "temperature", "top_p",
    "stream", "chat_template_kwargs", "reasoning", "text", "store", "previous_response_id", "include",
    "prompt_cache_key", "prompt_cache_retention", "metadata", "client_metadata", "context_management",
    "parallel_tool_calls", "truncation", "user", "safety_identifier", "service_tier", "max_tool_calls",
    "background", "stream_options", "top_logprobs"};

// The chat messages: the instructions and the system (developer) messages that open the input become one
// system message (Codex sends two developer messages before the first user message; the conversation's order
// and every later message stay as they are). Later system messages stay in place (chat/late_system.h).
ojson ChatMessages(const std::string& instructions, const ojson& conversation) {
  std::string system = instructions;
  size_t first = 0;
  for (; first < conversation.size() && conversation[first]["role"] == "system"; ++first) {
    const std::string text = conversation[first]["content"].get<std::string>();
    if (!system.empty() && !text.empty()) system += "\n\n";
    system += text;
  }
  ojson messages = ojson::array();
  if (!instructions.empty() || first > 0) messages.push_back({{"role", "system"}, {"content", system}});
  for (size_t i = first; i < conversation.size(); ++i) messages.push_back(conversation[i]);
  return messages;
}

}  // namespace

ParseResult<ResponsesRequest> ParseResponsesRequest(const ojson& body, ResponseStore& store,
                                                    const std::string& owner) {
  ResponsesRequest r;
  r.owner = owner;
  if (body.contains("previous_response_id") && body["previous_response_id"].is_string()) {
    r.previous_response_id = body["previous_response_id"].get<std::string>();
    auto prev = store.Get(r.previous_response_id, owner);
    if (!prev) {
      return ApiError::NotFound("previous response '" + r.previous_response_id +
                                "' not found (responses are kept in memory for a bounded time)");
    }
    r.messages = std::move(*prev);
  }
  if (!body.contains("input")) return Bad("'input' is required", "input");
  if (auto e = AppendItems(body["input"], &r.messages)) return *e;
  if (body.contains("instructions") && body["instructions"].is_string())
    r.instructions = body["instructions"].get<std::string>();
  LogIgnoredFieldsOnce(body, kKnownFields, "/v1/responses");
  ojson& c = r.chat_body;
  c["messages"] = ChatMessages(r.instructions, r.messages);
  if (body.contains("tools")) {
    auto tools = FlattenResponsesTools(body["tools"]);
    if (auto* e = std::get_if<ApiError>(&tools)) return *e;
    ResponsesTools& t = std::get<ResponsesTools>(tools);
    if (!t.tools.empty()) c["tools"] = std::move(t.tools);
    r.namespaced = std::move(t.namespaced);
    r.ignored_tools = std::move(t.ignored);
  }
  if (body.contains("tool_choice")) {
    const ojson& tc = body["tool_choice"];
    if (tc.is_object() && StringField(tc, "type", "") == "function") {
      c["tool_choice"] = {{"type", "function"}, {"function", {{"name", StringField(tc, "name", "")}}}};
    } else {
      c["tool_choice"] = tc;
    }
  }
  if (body.contains("max_output_tokens")) c["max_tokens"] = body["max_output_tokens"];
  for (const char* key : {"temperature", "top_p", "stream", "chat_template_kwargs", "model"}) {
    if (body.contains(key)) c[key] = body[key];
  }
  if (body.contains("reasoning") && body["reasoning"].is_object() && body["reasoning"].contains("effort") &&
      body["reasoning"]["effort"].is_string()) {
    std::string effort = body["reasoning"]["effort"].get<std::string>();
    if (!c.contains("chat_template_kwargs")) c["chat_template_kwargs"] = ojson::object();
    c["chat_template_kwargs"]["enable_thinking"] = effort != "none" && effort != "minimal";
  }
  if (body.contains("text") && body["text"].is_object() && body["text"].contains("format") &&
      body["text"]["format"].is_object() && StringField(body["text"]["format"], "type", "text") != "text") {
    return ApiError::Unsupported(
        "text.format '" + StringField(body["text"]["format"], "type", "") + "' is not supported", "text");
  }
  if (body.contains("store") && body["store"].is_boolean()) r.store = body["store"].get<bool>();
  r.stream = body.contains("stream") && body["stream"] == true;
  return r;
}

namespace {

// Output items in order: reasoning, message, function calls; streamed as response.* events.
class ResponsesWriter : public ResponseWriter {
 public:
  ResponsesWriter(std::string model, int32_t prompt_tokens, ResponsesRequest req, ResponseStore* store,
                  json echo)
      : model_(std::move(model)),
        prompt_tokens_(prompt_tokens),
        req_(std::move(req)),
        store_(store),
        echo_(std::move(echo)),
        id_(RandomId("resp_")),
        created_(UnixTime()) {}

  std::string StreamStart(const Generation&) override {
    json r = Response("in_progress", json::array(), nullptr);
    std::string out = Event("response.created", {{"response", r}});
    return out + Event("response.in_progress", {{"response", r}});
  }

  std::string StreamChunk(const Generation&, const GenerationChunk& c) override {
    std::string out;
    if (!c.delta.reasoning.empty()) {
      out += Open("reasoning", {{"type", "reasoning"}, {"summary", json::array()}}, "rs_");
      reasoning_ += c.delta.reasoning;
      out += Event("response.reasoning_text.delta", ItemRef(0, c.delta.reasoning));
    }
    if (!c.delta.content.empty()) {
      if (open_ != "message") {
        out += Open("message",
                    {{"type", "message"},
                     {"status", "in_progress"},
                     {"role", "assistant"},
                     {"content", json::array()}},
                    "msg_");
        out += Event("response.content_part.added", {{"item_id", item_id_},
                                                     {"output_index", output_index_},
                                                     {"content_index", 0},
                                                     {"part", TextPart("")}});
      }
      text_ += c.delta.content;
      out += Event("response.output_text.delta", ItemRef(0, c.delta.content));
    }
    for (const auto& call : c.delta.tool_calls) {
      if (!call.name.empty()) {
        out += Close();
        call_name_ = call.name;
        call_id_ = call.id.empty() ? RandomId("call_") : call.id;
        call_args_.clear();
        out += Open("function_call:" + std::to_string(call.index),
                    CallItem("", call_id_, call.name, "", "in_progress"), "fc_");
      }
      if (!call.arguments.empty()) {
        call_args_ += call.arguments;
        json e = {{"item_id", item_id_}, {"output_index", output_index_}, {"delta", call.arguments}};
        out += Event("response.function_call_arguments.delta", e);
      }
    }
    return out;
  }

  std::string StreamEnd(const Generation& g) override {
    std::string out = Close();
    const auto& c = g.completion();
    if (c.finish_reason == "error") {
      ApiError e = c.error ? ApiError::FromError(*c.error) : ApiError::Internal("generation failed");
      json r = Response("failed", output_, {{"code", "server_error"}, {"message", e.message}});
      return out + Event("response.failed", {{"response", r}});
    }
    json r = Finished(g, output_);
    std::string status = r["status"];
    return out +
           Event(status == "completed" ? "response.completed" : "response.incomplete", {{"response", r}});
  }

  json Full(const Generation& g, const GenerationChunk& total) override {
    json output = json::array();
    const ParsedDelta& d = total.delta;
    if (!d.reasoning.empty()) output.push_back(ReasoningItem(RandomId("rs_"), d.reasoning));
    if (!d.content.empty()) output.push_back(MessageItem(RandomId("msg_"), d.content, "completed"));
    for (const auto& call : d.tool_calls) {
      output.push_back(CallItem(RandomId("fc_"), call.id.empty() ? RandomId("call_") : call.id, call.name,
                                call.arguments, "completed"));
    }
    return Finished(g, output);
  }

 private:
  json Response(const std::string& status, const json& output, const json& error) const {
    json r = {{"id", id_},
              {"object", "response"},
              {"created_at", created_},
              {"status", status},
              {"model", model_},
              {"output", output},
              {"error", error},
              {"incomplete_details", nullptr},
              {"instructions", req_.instructions.empty() ? json(nullptr) : json(req_.instructions)},
              {"previous_response_id",
               req_.previous_response_id.empty() ? json(nullptr) : json(req_.previous_response_id)},
              {"parallel_tool_calls", true},
              {"store", req_.store},
              {"metadata", json::object()},
              {"text", {{"format", {{"type", "text"}}}}}};
    for (const auto& [k, v] : echo_.items()) r[k] = v;
    return r;
  }
  // The final response object; stores the conversation for previous_response_id.
  json Finished(const Generation& g, const json& output) {
    const auto& c = g.completion();
    bool truncated = g.FinishReason() == "length";
    json r = Response(truncated ? "incomplete" : "completed", output, nullptr);
    if (truncated) r["incomplete_details"] = {{"reason", "max_output_tokens"}};
    int32_t out_tokens = g.accepted_tokens();
    r["usage"] = {{"input_tokens", prompt_tokens_},
                  {"input_tokens_details", {{"cached_tokens", c.cached_tokens}}},
                  {"output_tokens", out_tokens},
                  {"output_tokens_details", {{"reasoning_tokens", 0}}},
                  {"total_tokens", prompt_tokens_ + out_tokens}};
    r["timings"] = TimingsJson(c);
    r["cache"] = CacheReportJson(c.cache);
    if (req_.store && store_) Store(output);
    return r;
  }
  void Store(const json& output) {
    ojson messages = req_.messages;
    ojson answer = {{"role", "assistant"}, {"content", ""}};
    for (const auto& item : output) {
      std::string type = item["type"];
      if (type == "reasoning" && !item["content"].empty()) {
        answer["reasoning_content"] = item["content"][0]["text"];
      } else if (type == "message") {
        answer["content"] = item["content"][0]["text"];
      } else if (type == "function_call") {
        if (!answer.contains("tool_calls")) answer["tool_calls"] = ojson::array();
        std::string name = item["name"];
        if (item.contains("namespace")) name = QualifiedToolName(item["namespace"], name);
        answer["tool_calls"].push_back({{"id", item["call_id"]},
                                        {"type", "function"},
                                        {"function", {{"name", name}, {"arguments", item["arguments"]}}}});
      }
    }
    messages.push_back(std::move(answer));
    if (!store_->Put(id_, req_.owner, std::move(messages)))
      LOG_WARN("response %s not stored: its conversation is larger than --responses-max-mib", id_.c_str());
  }
  static json TextPart(const std::string& text) {
    return {{"type", "output_text"}, {"text", text}, {"annotations", json::array()}};
  }
  static json ReasoningItem(const std::string& id, const std::string& text) {
    return {{"type", "reasoning"},
            {"id", id},
            {"summary", json::array()},
            {"content", json::array({{{"type", "reasoning_text"}, {"text", text}}})}};
  }
  static json MessageItem(const std::string& id, const std::string& text, const char* status) {
    return {{"type", "message"},
            {"id", id},
            {"status", status},
            {"role", "assistant"},
            {"content", json::array({TextPart(text)})}};
  }
  // `name` as the model wrote it; a function of a namespace tool goes out as its own name plus the namespace.
  json CallItem(const std::string& id, const std::string& call_id, const std::string& name, const std::string& args,
                const char* status) const {
    json item = {{"type", "function_call"}, {"id", id},        {"call_id", call_id}, {"name", name},
                 {"arguments", args},       {"status", status}};
    auto ns = req_.namespaced.find(name);
    if (ns != req_.namespaced.end()) {
      item["name"] = ns->second.second;
      item["namespace"] = ns->second.first;
    }
    return item;
  }
  json ItemRef(int content_index, const std::string& delta) const {
    return {{"item_id", item_id_},
            {"output_index", output_index_},
            {"content_index", content_index},
            {"delta", delta}};
  }
  std::string Event(const std::string& type, json data) {
    data["type"] = type;
    data["sequence_number"] = seq_++;
    return NamedSse(type, data);
  }
  std::string Open(const std::string& kind, json item, const char* id_prefix) {
    if (open_ == kind) return "";
    std::string out = Close();
    open_ = kind;
    item_id_ = RandomId(id_prefix);
    item["id"] = item_id_;
    out += Event("response.output_item.added", {{"output_index", output_index_}, {"item", item}});
    return out;
  }
  std::string Close() {
    if (open_.empty()) return "";
    std::string out;
    json item;
    if (open_ == "reasoning") {
      out += Event("response.reasoning_text.done", {{"item_id", item_id_},
                                                    {"output_index", output_index_},
                                                    {"content_index", 0},
                                                    {"text", reasoning_}});
      item = ReasoningItem(item_id_, reasoning_);
      reasoning_.clear();
    } else if (open_ == "message") {
      json ref = {{"item_id", item_id_}, {"output_index", output_index_}, {"content_index", 0}};
      json done = ref;
      done["text"] = text_;
      out += Event("response.output_text.done", done);
      json part = ref;
      part["part"] = TextPart(text_);
      out += Event("response.content_part.done", part);
      item = MessageItem(item_id_, text_, "completed");
      text_.clear();
    } else {
      out += Event("response.function_call_arguments.done",
                   {{"item_id", item_id_}, {"output_index", output_index_}, {"arguments", call_args_}});
      item = CallItem(item_id_, call_id_, call_name_, call_args_, "completed");
    }
    out += Event("response.output_item.done", {{"output_index", output_index_}, {"item", item}});
    output_.push_back(std::move(item));
    open_.clear();
    ++output_index_;
    return out;
  }

  std::string model_;
  int32_t prompt_tokens_;
  ResponsesRequest req_;
  ResponseStore* store_;
  json echo_;  // request fields echoed in the response object
  std::string id_;
  int64_t created_;
  int64_t seq_ = 0;
  std::string open_, item_id_;
  int output_index_ = 0;
  json output_ = json::array();  // closed items (streaming)
  std::string reasoning_, text_, call_name_, call_id_, call_args_;
};

}  // namespace

void Server::Impl::HandleResponses(const httplib::Request& req, httplib::Response& res) {
  auto body = ParseJsonBody(req.body, parse_options.limits);
  nlohmann::ordered_json* j = nullptr;
  if (!Take(body, res, &j)) return;
  auto parsed = ParseResponsesRequest(*j, stored_responses, ClientOf(req));
  ResponsesRequest* r = nullptr;
  if (!Take(parsed, res, &r)) return;
  auto chat = ParseChatRequest(r->chat_body, parse_options);
  ChatRequest* c = nullptr;
  if (!Take(chat, res, &c)) return;
  auto prepared = PrepareChat(*c, nullptr);
  PreparedGeneration* p = nullptr;
  if (!Take(prepared, res, &p)) return;
  json echo = json::object();
  for (const char* key : {"temperature", "top_p", "max_output_tokens", "tool_choice", "tools", "reasoning"}) {
    if (j->contains(key)) echo[key] = json::parse((*j)[key].dump());
  }
  if (!echo.contains("tools")) echo["tools"] = json::array();
  if (!echo.contains("tool_choice")) echo["tool_choice"] = "auto";
  if (!r->ignored_tools.empty()) {
    std::string types;
    for (const auto& t : r->ignored_tools) types += (types.empty() ? "" : ", ") + t;
    // Hosted tools run on OpenAI's side; a local model is not offered them (docs/clients.md).
    LogOnce("/v1/responses: hosted tools not offered to the model (they run on OpenAI's side): " + types);
    res.set_header("X-Rewind-Ignored-Tools", types);
  }
  p->writer = std::make_unique<ResponsesWriter>(config.model_name, static_cast<int32_t>(p->prompt.size()),
                                                std::move(*r), &stored_responses, std::move(echo));
  RunGeneration(req, res, std::move(*p));
}

}  // namespace rw::server
