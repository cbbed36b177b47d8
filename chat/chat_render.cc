#include "chat/chat_render.h"

#include <algorithm>
#include <unordered_map>

#include "base/file.h"

namespace rw::chat {
namespace {

using jinja::Value;
using Json = nlohmann::ordered_json;

// Records, for every top-level loop, which message objects it visited and where the output stood.
class SpanObserver : public jinja::LoopObserver {
 public:
  struct Loop {
    size_t begin = 0, end = 0;
    std::vector<std::pair<size_t, size_t>> hits;  // (message index, output offset)
  };

  explicit SpanObserver(const Value& messages) {
    const auto& l = *messages.as_list();
    for (size_t i = 0; i < l.size(); ++i) {
      if (l[i].is_dict()) index_.emplace(l[i].as_dict().get(), i);
    }
  }

  void OnLoopBegin(size_t off) override { stack_.push_back(Loop{off, off, {}}); }
  void OnIteration(const Value& item, size_t off) override {
    if (stack_.empty() || !item.is_dict()) return;
    auto it = index_.find(item.as_dict().get());
    if (it != index_.end()) stack_.back().hits.emplace_back(it->second, off);
  }
  void OnLoopEnd(size_t off) override {
    if (stack_.empty()) return;
    Loop l = std::move(stack_.back());
    stack_.pop_back();
    l.end = off;
    if (!l.hits.empty()) done_.push_back(std::move(l));
  }

  // The conversation loop: most output, then most messages visited.
  const Loop* Best() const {
    const Loop* best = nullptr;
    for (const auto& l : done_) {
      if (!best || l.end - l.begin > best->end - best->begin ||
          (l.end - l.begin == best->end - best->begin && l.hits.size() > best->hits.size())) {
        best = &l;
      }
    }
    return best;
  }

 private:
  std::unordered_map<const jinja::Dict*, size_t> index_;
  std::vector<Loop> stack_;
  std::vector<Loop> done_;
};

Json NormalizeMessages(const Json& messages, bool parse_arguments) {
  if (!parse_arguments) return messages;
  Json out = messages;
  for (auto& m : out) {
    if (!m.is_object() || !m.contains("tool_calls") || !m["tool_calls"].is_array()) continue;
    for (auto& tc : m["tool_calls"]) {
      if (!tc.is_object()) continue;
      Json* fn = tc.contains("function") && tc["function"].is_object() ? &tc["function"] : &tc;
      if (fn->contains("arguments") && (*fn)["arguments"].is_string()) {
        Json parsed = Json::parse((*fn)["arguments"].get<std::string>(), nullptr, /*allow_exceptions=*/false);
        if (parsed.is_object()) (*fn)["arguments"] = std::move(parsed);
      }
    }
  }
  return out;
}

Value MakeContext(const Json& messages_json, const Json& tools, const RenderOptions& o, Value* messages_out) {
  Value ctx = Value::MakeDict();
  auto& d = *ctx.as_dict();
  *messages_out = jinja::FromJson(messages_json);
  d.Set("messages", *messages_out);
  if (tools.is_array() && !tools.empty()) {
    d.Set("tools", jinja::FromJson(o.normalize_tools ? NormalizeTools(tools) : tools));
  } else {
    d.Set("tools", Value(nullptr));
  }
  d.Set("add_generation_prompt", Value(o.add_generation_prompt));
  d.Set("enable_thinking", Value(o.enable_thinking));
  d.Set("bos_token", Value(o.bos_token));
  d.Set("eos_token", Value(o.eos_token));
  if (o.chat_template_kwargs.is_object()) {
    for (auto it = o.chat_template_kwargs.begin(); it != o.chat_template_kwargs.end(); ++it) {
      d.Set(it.key(), jinja::FromJson(it.value()));
    }
  }
  return ctx;
}

size_t CommonPrefix(const std::string& a, const std::string& b) {
  size_t n = std::min(a.size(), b.size()), i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

}  // namespace

Json NormalizeTools(const Json& tools) {
  if (!tools.is_array()) return tools;
  Json out = Json::array();
  for (const auto& t : tools) {
    if (!t.is_object() || !t.contains("function") || !t["function"].is_object() ||
        (t.contains("type") && t["type"] != "function")) {
      out.push_back(t);
      continue;
    }
    const Json& f = t["function"];
    Json fn = Json::object();
    fn["name"] = f.contains("name") ? f["name"] : Json("");
    fn["description"] = f.contains("description") ? f["description"] : Json("");
    fn["parameters"] = f.contains("parameters") ? f["parameters"] : Json::object();
    Json nt = Json::object();
    nt["type"] = "function";
    nt["function"] = std::move(fn);
    out.push_back(std::move(nt));
  }
  return out;
}

Expected<RenderedChat> RenderChat(const Template& tmpl, const Json& messages_in, const Json& tools,
                                  const RenderOptions& options) {
  if (!messages_in.is_array()) return Error::InvalidArgument("messages must be an array");
  const Json messages = NormalizeMessages(messages_in, options.parse_tool_arguments);
  Value msgs;
  Value ctx = MakeContext(messages, tools, options, &msgs);
  SpanObserver observer(msgs);
  RenderedChat r;
  REWIND_ASSIGN_OR_RETURN(r.text, tmpl.Render(ctx, &observer));
  const size_t n = messages.size();
  r.spans.message_start.assign(n, 0);
  const SpanObserver::Loop* loop = observer.Best();
  if (loop) {
    std::vector<size_t> start(n, SIZE_MAX);
    for (const auto& [i, off] : loop->hits) start[i] = std::min(start[i], off);
    r.spans.generation_start = options.add_generation_prompt ? loop->end : r.text.size();
    size_t next = loop->end;
    for (size_t i = n; i-- > 0;) {
      if (start[i] == SIZE_MAX || start[i] > next) start[i] = next;
      next = start[i];
    }
    if (n > 1 && start[0] == start[1]) start[0] = 0;
    if (n == 1 && start[0] == loop->end) start[0] = 0;
    r.spans.message_start = std::move(start);
    return r;
  }
  // Fallback: the common prefix of the full text and the rendering of each shorter conversation.
  r.spans.exact = false;
  RenderOptions no_gen = options;
  no_gen.add_generation_prompt = false;
  size_t prev = 0;
  for (size_t i = 1; i <= n; ++i) {
    Json prefix(Json::value_t::array);
    for (size_t k = 0; k < i; ++k) prefix.push_back(messages[k]);
    Value pm;
    Value pctx = MakeContext(prefix, tools, no_gen, &pm);
    auto text = tmpl.Render(pctx, nullptr);
    size_t at = text.ok() ? std::max(prev, CommonPrefix(r.text, *text)) : prev;
    if (i < n)
      r.spans.message_start[i] = at;
    else
      r.spans.generation_start = options.add_generation_prompt ? at : r.text.size();
    prev = at;
  }
  return r;
}

TokenSpans MapSpansToTokens(const MessageSpans& spans, std::span<const size_t> token_offsets,
                            size_t text_size) {
  auto map = [&](size_t b, bool* aligned) -> size_t {
    if (b >= text_size || token_offsets.empty()) {
      *aligned = true;
      return token_offsets.size();
    }
    auto it = std::upper_bound(token_offsets.begin(), token_offsets.end(), b);
    size_t idx = it == token_offsets.begin() ? 0 : static_cast<size_t>(it - token_offsets.begin()) - 1;
    *aligned = token_offsets[idx] == b;
    return idx;
  };
  TokenSpans t;
  for (size_t b : spans.message_start) {
    bool aligned = true;
    t.message_start.push_back(map(b, &aligned));
    t.aligned.push_back(aligned);
  }
  t.generation_start = map(spans.generation_start, &t.generation_aligned);
  return t;
}

}  // namespace rw::chat

namespace rw::chat {

Expected<Template> SelectTemplate(const std::string& gguf_template, const std::string& template_file) {
  if (!template_file.empty()) {
    auto text = ReadFileToString(template_file);
    if (!text.ok())
      return Error::NotFound("chat template file " + template_file + ": " + text.error().message);
    return Template::Parse(*text);
  }
  if (gguf_template.empty()) {
    return Error::NotFound("the model has no tokenizer.chat_template; pass a template file");
  }
  return Template::Parse(gguf_template);
}

}  // namespace rw::chat
