#include "chat/output_parser.h"

#include <algorithm>

namespace rw::chat {
namespace {

using Json = nlohmann::ordered_json;

constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";
constexpr std::string_view kCallOpen = "<tool_call>";
constexpr std::string_view kCallClose = "</tool_call>";

bool IsWs(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

size_t SkipWs(std::string_view s, size_t i) {
  while (i < s.size() && IsWs(s[i])) ++i;
  return i;
}

bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

// Length of the longest suffix of s that is a proper prefix of tag.
size_t PartialTagSuffix(std::string_view s, std::string_view tag) {
  size_t max = std::min(s.size(), tag.size() - 1);
  for (size_t n = max; n > 0; --n) {
    if (s.substr(s.size() - n) == tag.substr(0, n)) return n;
  }
  return 0;
}

std::string Trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && IsWs(s[b])) ++b;
  while (e > b && IsWs(s[e - 1])) --e;
  return std::string(s.substr(b, e - b));
}

const Json* ParamSchema(const Json& tools, const std::string& fn, const std::string& param) {
  if (!tools.is_array()) return nullptr;
  for (const auto& t : tools) {
    const Json* f = t.is_object() && t.contains("function") ? &t["function"] : &t;
    if (!f->is_object() || !f->contains("name") || (*f)["name"] != fn) continue;
    if (!f->contains("parameters")) return nullptr;
    const Json& p = (*f)["parameters"];
    if (!p.is_object() || !p.contains("properties") || !p["properties"].is_object()) return nullptr;
    const Json& props = p["properties"];
    auto it = props.find(param);
    return it == props.end() ? nullptr : &*it;
  }
  return nullptr;
}

}  // namespace

Json ParameterValue(const std::string& raw, const Json* schema) {
  std::vector<std::string> types;
  if (schema && schema->is_object() && schema->contains("type")) {
    const Json& t = (*schema)["type"];
    if (t.is_string()) types.push_back(t.get<std::string>());
    if (t.is_array()) {
      for (const auto& x : t) {
        if (x.is_string()) types.push_back(x.get<std::string>());
      }
    }
  }
  auto has = [&](const char* t) { return std::find(types.begin(), types.end(), t) != types.end(); };
  if (types.empty()) return raw;
  std::string v = Trim(raw);
  if (has("null") && v == "null") return nullptr;
  if (has("string")) return raw;
  if (has("boolean")) {
    if (v == "true" || v == "True") return true;
    if (v == "false" || v == "False") return false;
  }
  Json parsed = Json::parse(v, nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_discarded()) {
    if ((has("integer") && (parsed.is_number_integer())) || (has("number") && parsed.is_number()) ||
        (has("boolean") && parsed.is_boolean()) || (has("object") && parsed.is_object()) ||
        (has("array") && parsed.is_array())) {
      return parsed;
    }
    if (has("integer") && parsed.is_number_float() &&
        parsed.get<double>() == static_cast<double>(static_cast<int64_t>(parsed.get<double>()))) {
      return static_cast<int64_t>(parsed.get<double>());
    }
  }
  return raw;
}

OutputParser::OutputParser(ParserOptions options) : opt_(std::move(options)) {
  if (!opt_.parse_reasoning)
    state_ = State::kContent;
  else
    state_ = opt_.starts_in_reasoning ? State::kReasoning : State::kStart;
}

void OutputParser::FlushPendingWs(ParserDelta* d) {
  if (pending_ws_.empty()) return;
  d->content += pending_ws_;
  message_.content += pending_ws_;
  pending_ws_.clear();
}

void OutputParser::EmitContent(std::string_view s, ParserDelta* d) {
  size_t e = s.size();
  while (e > 0 && IsWs(s[e - 1])) --e;
  if (e == 0) {
    pending_ws_.append(s);
    return;
  }
  std::string out = pending_ws_;
  out.append(s.substr(0, e));
  pending_ws_.assign(s.substr(e));
  d->content += out;
  message_.content += out;
  content_started_ = true;
}

void OutputParser::EmitReasoning(std::string_view s, ParserDelta* d) {
  size_t e = s.size();
  while (e > 0 && IsWs(s[e - 1])) --e;
  if (e == 0) {
    pending_ws_.append(s);
    return;
  }
  std::string out = pending_ws_;
  out.append(s.substr(0, e));
  pending_ws_.assign(s.substr(e));
  d->reasoning += out;
  message_.reasoning_content += out;
}

bool OutputParser::TryToolCall(std::string_view block, bool final, ParserDelta* d) {
  size_t i = SkipWs(block, kCallOpen.size());
  constexpr std::string_view kFn = "<function=";
  if (!StartsWith(block.substr(i), kFn)) return false;
  i += kFn.size();
  size_t gt = block.find('>', i);
  if (gt == std::string_view::npos) return false;
  std::string name = Trim(block.substr(i, gt - i));
  if (name.empty() || name.find('\n') != std::string::npos) return false;
  i = gt + 1;
  Json args = Json::object();
  bool closed = false;
  while (true) {
    i = SkipWs(block, i);
    std::string_view rest = block.substr(i);
    if (StartsWith(rest, "</function>")) {
      i += 11;
      closed = true;
      break;
    }
    constexpr std::string_view kParam = "<parameter=";
    if (!StartsWith(rest, kParam)) break;
    i += kParam.size();
    size_t pgt = block.find('>', i);
    if (pgt == std::string_view::npos) return false;
    std::string pname = Trim(block.substr(i, pgt - i));
    if (pname.empty()) return false;
    size_t vstart = pgt + 1;
    size_t end = block.find("</parameter>", vstart);
    size_t next_param = block.find("<parameter=", vstart);
    size_t fn_end = block.find("</function>", vstart);
    size_t stop = std::min(next_param, fn_end);
    size_t vend;
    if (end != std::string_view::npos && end < stop) {
      vend = end;
      i = end + 12;
    } else if (stop != std::string_view::npos) {
      vend = stop;  // a missing </parameter>: the value ends at the next tag
      i = stop;
    } else {
      return false;
    }
    std::string_view value = block.substr(vstart, vend - vstart);
    if (!value.empty() && value.front() == '\n') value.remove_prefix(1);
    if (!value.empty() && value.back() == '\n') value.remove_suffix(1);
    args[pname] = ParameterValue(std::string(value), ParamSchema(opt_.tools, name, pname));
  }
  if (!closed) return false;
  i = SkipWs(block, i);
  std::string_view tail = block.substr(i);
  if (!(tail == kCallClose || (final && tail.empty()))) return false;
  ToolCallDelta delta;
  delta.index = message_.tool_calls.size();
  delta.name = name;
  delta.arguments = args.dump(-1, ' ', false, Json::error_handler_t::replace);
  message_.tool_calls.push_back({delta.name, delta.arguments});
  d->tool_calls.push_back(std::move(delta));
  return true;
}

void OutputParser::Process(bool final, ParserDelta* d) {
  while (true) {
    switch (state_) {
      case State::kStart: {
        size_t i = SkipWs(buf_, 0);
        std::string_view rest = std::string_view(buf_).substr(i);
        if (rest.empty() && !final) return;
        if (StartsWith(rest, kThinkOpen)) {
          buf_.erase(0, i + kThinkOpen.size());
          state_ = State::kReasoning;
          continue;
        }
        if (!final && StartsWith(kThinkOpen, rest)) return;
        state_ = State::kContent;
        continue;
      }
      case State::kReasoning: {
        if (!reasoning_started_) {
          size_t i = SkipWs(buf_, 0);
          std::string_view rest = std::string_view(buf_).substr(i);
          if (rest.empty() && !final) return;
          if (opt_.starts_in_reasoning && !final && StartsWith(kThinkOpen, rest) &&
              rest.size() < kThinkOpen.size()) {
            return;
          }
          if (opt_.starts_in_reasoning && StartsWith(rest, kThinkOpen)) i += kThinkOpen.size();
          buf_.erase(0, SkipWs(buf_, i));
          reasoning_started_ = true;
        }
        size_t close = buf_.find(kThinkClose);
        size_t call = opt_.parse_tool_calls ? buf_.find(kCallOpen) : std::string::npos;
        if (close != std::string::npos && (call == std::string::npos || close < call)) {
          EmitReasoning(std::string_view(buf_).substr(0, close), d);
          pending_ws_.clear();
          buf_.erase(0, close + kThinkClose.size());
          state_ = State::kContent;
          content_started_ = false;
          continue;
        }
        if (call != std::string::npos) {
          EmitReasoning(std::string_view(buf_).substr(0, call), d);
          pending_ws_.clear();
          buf_.erase(0, call);
          state_ = State::kToolCall;
          continue;
        }
        if (final) {
          EmitReasoning(buf_, d);
          pending_ws_.clear();
          buf_.clear();
          return;
        }
        size_t hold = PartialTagSuffix(buf_, kThinkClose);
        if (opt_.parse_tool_calls) hold = std::max(hold, PartialTagSuffix(buf_, kCallOpen));
        EmitReasoning(std::string_view(buf_).substr(0, buf_.size() - hold), d);
        buf_.erase(0, buf_.size() - hold);
        return;
      }
      case State::kContent: {
        if (!content_started_) {
          buf_.erase(0, SkipWs(buf_, 0));
          if (buf_.empty()) return;
        }
        size_t call = opt_.parse_tool_calls ? buf_.find(kCallOpen) : std::string::npos;
        if (call != std::string::npos) {
          EmitContent(std::string_view(buf_).substr(0, call), d);
          ws_before_call_ = std::move(pending_ws_);
          pending_ws_.clear();
          buf_.erase(0, call);
          state_ = State::kToolCall;
          continue;
        }
        size_t hold = (final || !opt_.parse_tool_calls) ? 0 : PartialTagSuffix(buf_, kCallOpen);
        EmitContent(std::string_view(buf_).substr(0, buf_.size() - hold), d);
        buf_.erase(0, buf_.size() - hold);
        if (final) FlushPendingWs(d);
        return;
      }
      case State::kToolCall: {
        size_t close = buf_.find(kCallClose);
        if (close == std::string::npos && !final) return;
        size_t len = close == std::string::npos ? buf_.size() : close + kCallClose.size();
        std::string block = buf_.substr(0, len);
        buf_.erase(0, len);
        if (!TryToolCall(block, close == std::string::npos, d)) {
          // Malformed: the text is content after all.
          std::string text = ws_before_call_ + block;
          d->content += text;
          message_.content += text;
          content_started_ = true;
        } else {
          content_started_ = false;
        }
        ws_before_call_.clear();
        state_ = State::kContent;
        continue;
      }
    }
  }
}

ParserDelta OutputParser::Feed(std::string_view text) {
  ParserDelta d;
  buf_.append(text);
  Process(false, &d);
  return d;
}

ParserDelta OutputParser::Finish() {
  ParserDelta d;
  Process(true, &d);
  return d;
}

bool PromptEndsInsideThinking(std::string_view prompt) {
  size_t open = prompt.rfind(kThinkOpen);
  if (open == std::string_view::npos) return false;
  size_t close = prompt.rfind(kThinkClose);
  return close == std::string_view::npos || close < open;
}

ParsedMessage ParseOutput(std::string_view text, const ParserOptions& options) {
  OutputParser p(options);
  p.Feed(text);
  p.Finish();
  return p.message();
}

}  // namespace rw::chat
