#include "server/request_parse.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <utility>

namespace rw::server {
namespace {

using json = nlohmann::ordered_json;
using Err = std::optional<ApiError>;

std::string Quote(std::string_view field) { return "'" + std::string(field) + "'"; }

ApiError TypeError(std::string_view field, std::string_view expected) {
  return ApiError::BadRequest(Quote(field) + " must be " + std::string(expected), std::string(field));
}

// Looks up a field; null counts as absent (SDKs send explicit nulls).
const json* Field(const json& obj, const char* name) {
  auto it = obj.find(name);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

Err GetBool(const json& obj, const char* name, bool* out) {
  const json* v = Field(obj, name);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) return TypeError(name, "a boolean");
  *out = v->get<bool>();
  return std::nullopt;
}

// Integers: JSON integers, or floats with an integral value (some clients send 100.0).
Err GetInt64(const json& obj, const char* name, int64_t lo, int64_t hi, int64_t* out) {
  const json* v = Field(obj, name);
  if (!v) return std::nullopt;
  int64_t x = 0;
  if (v->is_number_unsigned()) {
    uint64_t u = v->get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return ApiError::BadRequest(Quote(name) + " is out of range", name);
    }
    x = static_cast<int64_t>(u);
  } else if (v->is_number_integer()) {
    x = v->get<int64_t>();
  } else if (v->is_number_float()) {
    double d = v->get<double>();
    if (!std::isfinite(d) || d != std::floor(d) || d < -9.0e18 || d > 9.0e18)
      return TypeError(name, "an integer");
    x = static_cast<int64_t>(d);
  } else {
    return TypeError(name, "an integer");
  }
  if (x < lo || x > hi) {
    return ApiError::BadRequest(Quote(name) + " must be between " + std::to_string(lo) + " and " +
                                    std::to_string(hi) + ", got " + std::to_string(x),
                                name);
  }
  *out = x;
  return std::nullopt;
}

Err GetInt32(const json& obj, const char* name, int64_t lo, int64_t hi, int32_t* out) {
  int64_t x = *out;
  if (auto e = GetInt64(obj, name, lo, hi, &x)) return e;
  *out = static_cast<int32_t>(x);
  return std::nullopt;
}

Err GetFloat(const json& obj, const char* name, double lo, double hi, float* out) {
  const json* v = Field(obj, name);
  if (!v) return std::nullopt;
  if (!v->is_number()) return TypeError(name, "a number");
  double d = v->get<double>();
  if (!std::isfinite(d) || d < lo || d > hi) {
    char buf[160];
    std::snprintf(buf, sizeof(buf), "'%s' must be between %g and %g", name, lo, hi);
    return ApiError::BadRequest(buf, name);
  }
  *out = static_cast<float>(d);
  return std::nullopt;
}

Err GetString(const json& obj, const char* name, std::string* out) {
  const json* v = Field(obj, name);
  if (!v) return std::nullopt;
  if (!v->is_string()) return TypeError(name, "a string");
  *out = v->get<std::string>();
  return std::nullopt;
}

#define RETURN_IF_ERR(expr)           \
  do {                                \
    if (auto _e = (expr)) return *_e; \
  } while (0)

// Fields common to chat and text completions. `chat`: logprobs is a boolean (chat) or an integer
// (completions).
Err ParseGeneration(const json& body, bool chat, const ParseOptions& options, GenerationParams* g) {
  const RequestLimits& limits = options.limits;
  g->sampling.params = options.defaults;
  RETURN_IF_ERR(GetBool(body, "stream", &g->stream));
  if (const json* so = Field(body, "stream_options")) {
    if (!so->is_object()) return TypeError("stream_options", "an object");
    RETURN_IF_ERR(GetBool(*so, "include_usage", &g->include_usage));
  }
  int32_t max_tokens = -1;
  RETURN_IF_ERR(GetInt32(body, "max_tokens", 1, 1 << 30, &max_tokens));
  RETURN_IF_ERR(GetInt32(body, "max_completion_tokens", 1, 1 << 30, &max_tokens));
  RETURN_IF_ERR(GetInt32(body, "n_predict", -1, 1 << 30, &max_tokens));  // llama-server spelling
  if (max_tokens == 0) return ApiError::BadRequest("'n_predict' must not be 0", "n_predict");
  g->max_tokens = max_tokens;
  if (Field(body, "seed")) {
    int64_t seed = 0;
    RETURN_IF_ERR(GetInt64(body, "seed", std::numeric_limits<int64_t>::min(),
                           std::numeric_limits<int64_t>::max(), &seed));
    g->seed = static_cast<uint64_t>(seed);
  }
  int32_t n = 1;
  RETURN_IF_ERR(GetInt32(body, "n", 1, 1 << 20, &n));
  if (n != 1) return ApiError::Unsupported("only n = 1 is supported", "n");
  int32_t best_of = 1;
  RETURN_IF_ERR(GetInt32(body, "best_of", 1, 1 << 20, &best_of));
  if (best_of != 1) return ApiError::Unsupported("only best_of = 1 is supported", "best_of");
  RETURN_IF_ERR(ParseSampling(body, &g->sampling, limits));
  if (const json* stop = Field(body, "stop")) {
    auto add = [&](const json& s) -> Err {
      if (!s.is_string()) return TypeError("stop", "a string or an array of strings");
      const std::string& text = s.get_ref<const std::string&>();
      if (static_cast<int64_t>(text.size()) > limits.stop_length)
        return OverLimit("stop", "has a string of " + std::to_string(text.size()) + " bytes", limits.stop_length,
                         "--max-stop-length");
      if (!text.empty()) g->stop.push_back(text);
      return std::nullopt;
    };
    if (stop->is_string()) {
      RETURN_IF_ERR(add(*stop));
    } else if (stop->is_array()) {
      if (static_cast<int64_t>(stop->size()) > limits.stop)
        return OverLimit("stop", "has " + std::to_string(stop->size()) + " strings", limits.stop, "--max-stop");
      for (const auto& s : *stop) RETURN_IF_ERR(add(s));
    } else {
      return TypeError("stop", "a string or an array of strings");
    }
  }
  if (chat) {
    RETURN_IF_ERR(GetBool(body, "logprobs", &g->logprobs));
    RETURN_IF_ERR(GetInt32(body, "top_logprobs", 0, limits.top_logprobs, &g->top_logprobs));
    if (g->top_logprobs > 0 && !g->logprobs) {
      return ApiError::BadRequest("'top_logprobs' requires 'logprobs' to be true", "top_logprobs");
    }
  } else if (Field(body, "logprobs")) {
    int32_t n_top = 0;
    RETURN_IF_ERR(GetInt32(body, "logprobs", 0, limits.top_logprobs, &n_top));
    g->logprobs = true;
    g->top_logprobs = n_top;
  }
  if (g->sampling.n_probs > 0 && g->top_logprobs == 0) {  // llama-server's spelling of top_logprobs
    g->logprobs = true;
    g->top_logprobs = g->sampling.n_probs;
  }
  RETURN_IF_ERR(GetBool(body, "ignore_eos", &g->ignore_eos));
  RETURN_IF_ERR(GetBool(body, "cache_prompt", &g->cache_prompt));
  RETURN_IF_ERR(GetInt32(body, "id_slot", -1, 1 << 20, &g->slot_id));
  RETURN_IF_ERR(GetInt32(body, "slot_id", -1, 1 << 20, &g->slot_id));
  return std::nullopt;
}

std::string At(const std::string& base, size_t i) { return base + "[" + std::to_string(i) + "]"; }

// Content: a string, null, or an array of text and image_url parts (an image part becomes {type: image,
// image_url: {url}}: server/image_prompt.cc decodes it). Returns the normalised value.
Err ParseContent(const json& v, const std::string& where, bool null_ok, json* out) {
  if (v.is_null()) {
    if (!null_ok) return ApiError::BadRequest(Quote(where) + " is required", where);
    *out = nullptr;
    return std::nullopt;
  }
  if (v.is_string()) {
    *out = v;
    return std::nullopt;
  }
  if (!v.is_array()) return TypeError(where, "a string or an array of content parts");
  json parts = json::array();
  for (size_t i = 0; i < v.size(); ++i) {
    const json& p = v[i];
    std::string pw = At(where, i);
    if (!p.is_object()) return TypeError(pw, "an object");
    std::string type;
    RETURN_IF_ERR(GetString(p, "type", &type));
    if (type == "image_url") {  // {"image_url": {"url": "data:..."}} or {"image_url": "data:..."}
      const json* iu = Field(p, "image_url");
      const json* url = iu && iu->is_object() ? Field(*iu, "url") : iu;
      if (!url || !url->is_string()) return TypeError(pw + ".image_url.url", "a string (a data: URI)");
      parts.push_back({{"type", "image"}, {"image_url", {{"url", *url}}}});  // rendered by the template
      continue;
    }
    if (type != "text") {
      return ApiError::Unsupported("content part type '" + type + "' is not supported (text and image_url only)", pw);
    }
    const json* text = Field(p, "text");
    if (!text || !text->is_string()) return TypeError(pw + ".text", "a string");
    parts.push_back({{"type", "text"}, {"text", *text}});
  }
  *out = std::move(parts);
  return std::nullopt;
}

Err ParseToolCalls(const json& v, const std::string& where, json* out) {
  if (!v.is_array()) return TypeError(where, "an array");
  json calls = json::array();
  for (size_t i = 0; i < v.size(); ++i) {
    std::string cw = At(where, i);
    const json& c = v[i];
    if (!c.is_object()) return TypeError(cw, "an object");
    const json* fn = Field(c, "function");
    if (!fn || !fn->is_object()) return TypeError(cw + ".function", "an object");
    std::string name;
    RETURN_IF_ERR(GetString(*fn, "name", &name));
    if (name.empty()) return ApiError::BadRequest(Quote(cw + ".function.name") + " is required", cw);
    json args = json::object();
    if (const json* a = Field(*fn, "arguments")) {
      if (a->is_string()) {
        const std::string& text = a->get_ref<const std::string&>();
        if (!text.empty()) {
          args = json::parse(text, nullptr, /*allow_exceptions=*/false);
          if (args.is_discarded() || !args.is_object()) {
            return ApiError::BadRequest(Quote(cw + ".function.arguments") + " must be a JSON object", cw);
          }
        }
      } else if (a->is_object()) {
        args = *a;
      } else {
        return TypeError(cw + ".function.arguments", "a JSON object or a string holding one");
      }
    }
    json call = {{"type", "function"}, {"function", {{"name", name}, {"arguments", std::move(args)}}}};
    std::string id;
    RETURN_IF_ERR(GetString(c, "id", &id));
    if (!id.empty()) call["id"] = id;
    calls.push_back(std::move(call));
  }
  *out = std::move(calls);
  return std::nullopt;
}

Err ParseMessages(const json& body, json* out) {
  const json* msgs = Field(body, "messages");
  if (!msgs) return ApiError::BadRequest("'messages' is required", "messages");
  if (!msgs->is_array()) return TypeError("messages", "an array");
  // An empty list goes to the template, as in llama-server: most raise (Qwen3.5: "No messages provided.";
  // jinja2: "list object has no element 0") and the request is a 400 quoting them.
  json norm = json::array();
  for (size_t i = 0; i < msgs->size(); ++i) {
    const json& m = (*msgs)[i];
    std::string w = At("messages", i);
    if (!m.is_object()) return TypeError(w, "an object");
    std::string role;
    const json* r = Field(m, "role");
    if (!r) return ApiError::BadRequest(Quote(w + ".role") + " is required", w);
    if (!r->is_string()) return TypeError(w + ".role", "a string");
    role = r->get<std::string>();
    if (role == "developer") role = "system";
    if (role != "system" && role != "user" && role != "assistant" && role != "tool") {
      return ApiError::BadRequest("unknown role '" + role + "' in " + w, w);
    }
    json nm = {{"role", role}};
    const json* content = Field(m, "content");
    json c;
    RETURN_IF_ERR(ParseContent(content ? *content : json(nullptr), w + ".content", role == "assistant", &c));
    nm["content"] = std::move(c);
    if (role == "assistant") {
      if (const json* rc = Field(m, "reasoning_content")) {
        if (!rc->is_string()) return TypeError(w + ".reasoning_content", "a string");
        nm["reasoning_content"] = *rc;
      }
      if (const json* tc = Field(m, "tool_calls")) {
        json calls;
        RETURN_IF_ERR(ParseToolCalls(*tc, w + ".tool_calls", &calls));
        if (!calls.empty()) nm["tool_calls"] = std::move(calls);
      }
    }
    for (const char* extra : {"name", "tool_call_id"}) {
      std::string s;
      RETURN_IF_ERR(GetString(m, extra, &s));
      if (Field(m, extra)) nm[extra] = s;
    }
    norm.push_back(std::move(nm));
  }
  *out = std::move(norm);
  return std::nullopt;
}

Err ParseTools(const json& body, const RequestLimits& limits, json* tools, std::string* tool_choice) {
  *tools = nullptr;
  if (const json* t = Field(body, "tools")) {
    if (!t->is_array()) return TypeError("tools", "an array");
    if (static_cast<int64_t>(t->size()) > limits.tools)
      return OverLimit("tools", "has " + std::to_string(t->size()) + " tools", limits.tools, "--max-tools");
    int64_t schema_nodes = 0;  // all tools' parameters together
    json norm = json::array();
    for (size_t i = 0; i < t->size(); ++i) {
      std::string w = At("tools", i);
      const json& tool = (*t)[i];
      if (!tool.is_object()) return TypeError(w, "an object");
      std::string type = "function";
      RETURN_IF_ERR(GetString(tool, "type", &type));
      if (type != "function") return ApiError::Unsupported("tool type '" + type + "' is not supported", w);
      const json* fn = Field(tool, "function");
      if (!fn || !fn->is_object()) return TypeError(w + ".function", "an object");
      std::string name, description;
      RETURN_IF_ERR(GetString(*fn, "name", &name));
      if (name.empty()) return ApiError::BadRequest(Quote(w + ".function.name") + " is required", w);
      json f = {{"name", name}};
      if (Field(*fn, "description")) {
        RETURN_IF_ERR(GetString(*fn, "description", &description));
        f["description"] = description;
      }
      if (const json* p = Field(*fn, "parameters")) {
        if (!p->is_object()) return TypeError(w + ".function.parameters", "an object");
        RETURN_IF_ERR(CheckSchemaSize(*p, limits, "tools", &schema_nodes));
        f["parameters"] = *p;
      }
      norm.push_back({{"type", "function"}, {"function", std::move(f)}});
    }
    if (!norm.empty()) *tools = std::move(norm);
  }
  *tool_choice = "auto";
  if (const json* tc = Field(body, "tool_choice")) {
    if (tc->is_string()) {
      *tool_choice = tc->get<std::string>();
      if (*tool_choice != "auto" && *tool_choice != "none" && *tool_choice != "required") {
        return ApiError::BadRequest("'tool_choice' must be auto, none, required or a function",
                                    "tool_choice");
      }
    } else if (tc->is_object()) {
      const json* fn = Field(*tc, "function");
      std::string name;
      if (!fn || !fn->is_object()) return TypeError("tool_choice.function", "an object");
      RETURN_IF_ERR(GetString(*fn, "name", &name));
      bool found = false;
      if (tools->is_array()) {
        for (const auto& t : *tools) found = found || t["function"]["name"] == name;
      }
      if (!found)
        return ApiError::BadRequest("'tool_choice' names an unknown function '" + name + "'", "tool_choice");
      *tool_choice = "function:" + name;
    } else {
      return TypeError("tool_choice", "a string or an object");
    }
    if (*tool_choice == "required" && tools->is_null()) {
      return ApiError::BadRequest("'tool_choice' is 'required' but no tools were given", "tool_choice");
    }
  }
  return std::nullopt;
}

Err ParseTemplateKwargs(const json& body, json* kwargs, bool* add_generation_prompt) {
  *kwargs = json::object();
  if (const json* k = Field(body, "chat_template_kwargs")) {
    if (!k->is_object()) return TypeError("chat_template_kwargs", "an object");
    *kwargs = *k;
  }
  if (Field(body, "enable_thinking")) {
    bool on = true;
    RETURN_IF_ERR(GetBool(body, "enable_thinking", &on));
    (*kwargs)["enable_thinking"] = on;
  }
  if (kwargs->contains("enable_thinking") && !(*kwargs)["enable_thinking"].is_boolean()) {
    return TypeError("chat_template_kwargs.enable_thinking", "a boolean");
  }
  return GetBool(body, "add_generation_prompt", add_generation_prompt);
}

// `checkpoints`: ints are message indices (negative from the end) when `n_messages` >= 0, token positions
// otherwise; {"position": N} is always a token position, {"message": i} a message index.
Err ParseCheckpoints(const json& body, int64_t n_messages, std::vector<int32_t>* messages,
                     std::vector<int32_t>* positions) {
  const json* cp = Field(body, "checkpoints");
  if (!cp) return std::nullopt;
  if (!cp->is_array()) return TypeError("checkpoints", "an array");
  if (cp->size() > 4096)
    return ApiError::BadRequest("'checkpoints' has more than 4096 entries", "checkpoints");
  for (size_t i = 0; i < cp->size(); ++i) {
    const json& e = (*cp)[i];
    json wrapper = {{"v", e}};
    bool is_message = n_messages >= 0;
    const char* key = "v";
    if (e.is_object()) {
      if (e.contains("position")) {
        is_message = false;
        wrapper = {{"v", e["position"]}};
      } else if (e.contains("message") && n_messages >= 0) {
        is_message = true;
        wrapper = {{"v", e["message"]}};
      } else {
        return ApiError::BadRequest("checkpoints entries are integers, {\"message\": i} or {\"position\": n}",
                                    "checkpoints");
      }
    }
    if (is_message) {
      int32_t idx = 0;
      if (auto err = GetInt32(wrapper, key, -n_messages, n_messages - 1, &idx)) {
        return ApiError::BadRequest("checkpoints[" + std::to_string(i) + "] is not a message index",
                                    "checkpoints");
      }
      messages->push_back(idx < 0 ? static_cast<int32_t>(n_messages + idx) : idx);
    } else {
      int32_t pos = 0;
      if (auto err = GetInt32(wrapper, key, 0, std::numeric_limits<int32_t>::max(), &pos)) {
        return ApiError::BadRequest("checkpoints[" + std::to_string(i) + "] is not a token position",
                                    "checkpoints");
      }
      positions->push_back(pos);
    }
  }
  return std::nullopt;
}

Err ParseModel(const json& body, std::string* model) { return GetString(body, "model", model); }

ParseResult<ChatRequest> ParseChatImpl(const json& body, bool generation, const ParseOptions& options) {
  if (!body.is_object()) return ApiError::BadRequest("the request body must be a JSON object");
  ChatRequest r;
  RETURN_IF_ERR(ParseModel(body, &r.model));
  RETURN_IF_ERR(ParseMessages(body, &r.messages));
  RETURN_IF_ERR(ParseTools(body, options.limits, &r.tools, &r.tool_choice));
  RETURN_IF_ERR(ParseTemplateKwargs(body, &r.template_kwargs, &r.add_generation_prompt));
  RETURN_IF_ERR(GetString(body, "reasoning_format", &r.reasoning_format));
  if (!r.reasoning_format.empty() && r.reasoning_format != "none" && r.reasoning_format != "deepseek" &&
      r.reasoning_format != "deepseek-legacy" && r.reasoning_format != "auto") {
    return ApiError::BadRequest("'reasoning_format' must be none, deepseek, deepseek-legacy or auto",
                                "reasoning_format");
  }
  RETURN_IF_ERR(GetInt32(body, "thinking_budget_tokens", -1, 1 << 30, &r.reasoning_budget));
  RETURN_IF_ERR(GetInt32(body, "reasoning_budget_tokens", -1, 1 << 30, &r.reasoning_budget));
  if (Field(body, "reasoning_budget_message")) {
    std::string message;
    RETURN_IF_ERR(GetString(body, "reasoning_budget_message", &message));
    r.reasoning_budget_message = std::move(message);
  }
  if (generation) {
    RETURN_IF_ERR(ParseGeneration(body, /*chat=*/true, options, &r.gen));
    RETURN_IF_ERR(ParseCheckpoints(body, static_cast<int64_t>(r.messages.size()), &r.checkpoint_messages,
                                   &r.checkpoint_positions));
  }
  return r;
}

Err ParseTokenArray(const json& v, const std::string& where, std::vector<int32_t>* out) {
  if (!v.is_array()) return TypeError(where, "an array of token ids");
  out->reserve(v.size());
  for (const auto& t : v) {
    if (!t.is_number_integer()) return TypeError(where, "an array of token ids");
    int64_t id = t.is_number_unsigned()
                     ? static_cast<int64_t>(std::min<uint64_t>(t.get<uint64_t>(), 1ull << 40))
                     : t.get<int64_t>();
    if (id < 0 || id > std::numeric_limits<int32_t>::max()) {
      return ApiError::BadRequest("token id " + std::to_string(id) + " out of range", where);
    }
    out->push_back(static_cast<int32_t>(id));
  }
  return std::nullopt;
}

constexpr int kMaxJsonDepth = 128;

}  // namespace

std::string StringField(const json& obj, const char* key, const std::string& fallback) {
  if (!obj.is_object()) return fallback;
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : fallback;
}

bool IsValidUtf8(std::string_view s) {
  size_t i = 0, n = s.size();
  while (i < n) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    int len;
    uint32_t cp;
    if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > n) return false;
    for (int k = 1; k < len; ++k) {
      unsigned char cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF)) {
      return false;
    }
    i += len;
  }
  return true;
}

ParseResult<json> ParseJsonBody(std::string_view body, const RequestLimits& limits) {
  if (!IsValidUtf8(body)) return ApiError::BadRequest("the request body is not valid UTF-8");
  if (auto e = CheckJsonShape(body, limits, kMaxJsonDepth)) return *e;
  json j = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return ApiError::BadRequest("the request body is not valid JSON");
  if (!j.is_object()) return ApiError::BadRequest("the request body must be a JSON object");
  return j;
}

ParseResult<ChatRequest> ParseChatRequest(const json& body, const ParseOptions& options) {
  return ParseChatImpl(body, /*generation=*/true, options);
}

ParseResult<ChatRequest> ParseApplyTemplateRequest(const json& body, const RequestLimits& limits) {
  return ParseChatImpl(body, /*generation=*/false, ParseOptions(engine::SamplingParams(), limits));
}

ParseResult<CompletionRequest> ParseCompletionRequest(const json& body, const ParseOptions& options) {
  if (!body.is_object()) return ApiError::BadRequest("the request body must be a JSON object");
  CompletionRequest r;
  RETURN_IF_ERR(ParseModel(body, &r.model));
  const json* p = Field(body, "prompt");
  if (!p) return ApiError::BadRequest("'prompt' is required", "prompt");
  const json* one = p;
  if (p->is_array() && !p->empty() && (p->front().is_string() || p->front().is_array())) {
    if (p->size() != 1) return ApiError::Unsupported("only one prompt per request is supported", "prompt");
    one = &p->front();
  }
  if (one->is_string()) {
    r.prompt_text = one->get<std::string>();
  } else if (one->is_array()) {
    RETURN_IF_ERR(ParseTokenArray(*one, "prompt", &r.prompt_tokens));
    r.prompt_is_tokens = true;
  } else {
    return TypeError("prompt", "a string or an array of token ids");
  }
  RETURN_IF_ERR(ParseGeneration(body, /*chat=*/false, options, &r.gen));
  bool echo = false;
  RETURN_IF_ERR(GetBool(body, "echo", &echo));
  if (echo) return ApiError::Unsupported("'echo' is not supported", "echo");
  std::string suffix;
  RETURN_IF_ERR(GetString(body, "suffix", &suffix));
  if (!suffix.empty()) return ApiError::Unsupported("'suffix' is not supported", "suffix");
  std::vector<int32_t> unused;
  RETURN_IF_ERR(ParseCheckpoints(body, -1, &unused, &r.checkpoint_positions));
  return r;
}

ParseResult<TokenizeRequest> ParseTokenizeRequest(const json& body) {
  if (!body.is_object()) return ApiError::BadRequest("the request body must be a JSON object");
  TokenizeRequest r;
  const json* c = Field(body, "content");
  if (!c) return ApiError::BadRequest("'content' is required", "content");
  if (!c->is_string()) return TypeError("content", "a string");
  r.content = c->get<std::string>();
  RETURN_IF_ERR(GetBool(body, "add_special", &r.add_special));
  RETURN_IF_ERR(GetBool(body, "parse_special", &r.parse_special));
  RETURN_IF_ERR(GetBool(body, "with_pieces", &r.with_pieces));
  return r;
}

ParseResult<DetokenizeRequest> ParseDetokenizeRequest(const json& body) {
  if (!body.is_object()) return ApiError::BadRequest("the request body must be a JSON object");
  DetokenizeRequest r;
  const json* t = Field(body, "tokens");
  if (!t) return ApiError::BadRequest("'tokens' is required", "tokens");
  RETURN_IF_ERR(ParseTokenArray(*t, "tokens", &r.tokens));
  return r;
}

ParseResult<SlotActionRequest> ParseSlotAction(std::string_view slot_id, std::string_view action,
                                               std::string_view body) {
  SlotActionRequest r;
  if (slot_id.empty() || slot_id.size() > 6) return ApiError::BadRequest("invalid slot id");
  int32_t id = 0;
  for (char ch : slot_id) {
    if (ch < '0' || ch > '9') return ApiError::BadRequest("invalid slot id");
    id = id * 10 + (ch - '0');
  }
  r.slot = id;
  r.action = std::string(action);
  if (r.action != "save" && r.action != "restore" && r.action != "erase") {
    return ApiError::BadRequest("'action' must be save, restore or erase", "action");
  }
  if (r.action == "erase") return r;
  auto parsed = ParseJsonBody(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  const json& j = std::get<json>(parsed);
  RETURN_IF_ERR(GetString(j, "filename", &r.filename));
  const std::string& f = r.filename;
  if (f.empty()) return ApiError::BadRequest("'filename' is required", "filename");
  bool bad =
      f.size() > 255 || f[0] == '.' || f.find('/') != std::string::npos || f.find('\\') != std::string::npos;
  for (unsigned char ch : f) bad = bad || ch < 0x20 || ch == 0x7F;
  if (bad) return ApiError::BadRequest("invalid filename '" + f + "'", "filename");
  return r;
}

}  // namespace rw::server
