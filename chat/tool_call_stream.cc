#include "chat/tool_call_stream.h"

#include <cctype>
#include <cstdio>

#include "chat/output_parser.h"
#include "chat/text_scan.h"

namespace rw::chat {
namespace {

using Json = nlohmann::ordered_json;
using Result = ToolCallBlockParser::Result;

constexpr std::string_view kFunctionOpen = "<function=";
constexpr std::string_view kFunctionClose = "</function>";
constexpr std::string_view kParamOpen = "<parameter=";
constexpr std::string_view kParamClose = "</parameter>";
constexpr std::string_view kCallClose = "</tool_call>";

// End (exclusive) of the JSON string starting at s[i] == '"', or npos when it is not closed yet.
size_t StringEnd(std::string_view s, size_t i) {
  for (size_t k = i + 1; k < s.size(); ++k) {
    if (s[k] == '\\') {
      ++k;
    } else if (s[k] == '"') {
      return k + 1;
    }
  }
  return std::string_view::npos;
}

// End (exclusive) of the complete JSON value at s[0] (not whitespace), npos when more text is needed, 0 when
// it cannot be a JSON value. Scalars other than strings end at the first character that cannot continue them.
size_t ValueEnd(std::string_view s, bool final) {
  if (s.empty()) return std::string_view::npos;
  if (s[0] == '"') return StringEnd(s, 0);
  if (s[0] == '{' || s[0] == '[') {
    int depth = 0;
    for (size_t k = 0; k < s.size(); ++k) {
      char c = s[k];
      if (c == '"') {
        size_t e = StringEnd(s, k);
        if (e == std::string_view::npos) return e;
        k = e - 1;
      } else if (c == '{' || c == '[') {
        ++depth;
      } else if (c == '}' || c == ']') {
        if (--depth == 0) return k + 1;
      }
    }
    return std::string_view::npos;
  }
  size_t k = 0;
  auto scalar = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '+' || c == '.';
  };
  while (k < s.size() && scalar(s[k])) ++k;
  if (k == 0) return 0;
  return k < s.size() || final ? k : std::string_view::npos;
}

// Values that stay raw strings (untyped, or typed string and not null; see ParameterValue) stream as they are
// written; other values are emitted whole once typed.
bool StreamsAsString(const Json* schema) {
  if (!schema || !schema->is_object() || !schema->contains("type")) return true;
  const Json& t = (*schema)["type"];
  if (t.is_string()) return t == "string";
  if (!t.is_array()) return true;
  bool string = false, null = false, any = false;
  for (const auto& x : t) {
    if (!x.is_string()) continue;
    any = true;
    string = string || x == "string";
    null = null || x == "null";
  }
  return !any || (string && !null);
}

}  // namespace

std::string JsonEscape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out.push_back(ch);
        }
    }
  }
  return out;
}

const Json* ToolCallBlockParser::ParamSchema(const std::string& param) const {
  if (!tools_ || !tools_->is_array()) return nullptr;
  for (const auto& t : *tools_) {
    const Json* f = t.is_object() && t.contains("function") ? &t["function"] : &t;
    if (!f->is_object() || !f->contains("name") || (*f)["name"] != name_) continue;
    if (!f->contains("parameters")) return nullptr;
    const Json& p = (*f)["parameters"];
    if (!p.is_object() || !p.contains("properties") || !p["properties"].is_object()) return nullptr;
    const Json& props = p["properties"];
    auto it = props.find(param);
    return it == props.end() ? nullptr : &*it;
  }
  return nullptr;
}

void ToolCallBlockParser::Emit(std::vector<ToolCallDelta>* out, std::string args) {
  if (args.empty()) return;
  if (!out->empty() && out->back().index == index_) {
    out->back().arguments += args;
  } else {
    out->push_back({index_, "", std::move(args)});
  }
}

void ToolCallBlockParser::EmitHeader(std::vector<ToolCallDelta>* out) {
  out->push_back({index_, name_, ""});
  committed_ = true;
}

bool ToolCallBlockParser::EndCallAt(size_t at, std::vector<ToolCallDelta>* out) {
  if (!committed_ && name_.empty()) return false;
  CloseCall(out);
  phase_ = Phase::kEnd;
  pos_ = at;
  return true;
}

void ToolCallBlockParser::CloseCall(std::vector<ToolCallDelta>* out) {
  if (closed_) return;
  closed_ = true;
  if (!committed_) {
    EmitHeader(out);
    Emit(out, held_args_);
  }
  if (xml_) {
    Emit(out, n_params_ == 0 ? "{}" : "}");
  } else if (!have_args_) {
    Emit(out, "{}");
  }
}

Result ToolCallBlock::Feed(std::string_view text, bool final, std::vector<ToolCallDelta>* out) {
  buf_.append(text);
  while (true) {
    bool progressed = false;
    Result r = Step(final, out, &progressed);
    if (r != Result::kNeedMore) return r;
    if (progressed) continue;
    return final ? EndOfOutput(out) : r;
  }
}

Result ToolCallBlockParser::EndOfOutput(std::vector<ToolCallDelta>* out) {
  if (!committed_ && !(phase_ == Phase::kEnd)) return Result::kMalformed;
  CloseCall(out);
  pos_ = buf_.size();
  return Result::kDone;
}

Result ToolCallBlockParser::Step(bool final, std::vector<ToolCallDelta>* out, bool* progressed) {
  std::string_view all(buf_);
  size_t i = SkipWs(all, pos_);
  std::string_view rest = all.substr(i);
  switch (phase_) {
    case Phase::kDetect:
      if (StartsWith(rest, kFunctionOpen)) {
        pos_ = i + kFunctionOpen.size();
        xml_ = true;
        phase_ = Phase::kXmlName;
      } else if (StartsWith(rest, "{")) {
        pos_ = i + 1;
        phase_ = Phase::kJsonKey;
      } else if (rest.empty() || (MayBecome(rest, kFunctionOpen) && !final)) {
        return Result::kNeedMore;
      } else {
        return Result::kMalformed;
      }
      break;
    case Phase::kXmlName: {
      size_t gt = all.find('>', pos_);
      size_t nl = all.find('\n', pos_);
      if (nl < gt) return Result::kMalformed;
      if (gt == std::string_view::npos) return Result::kNeedMore;
      name_ = Trim(all.substr(pos_, gt - pos_));
      if (name_.empty()) return Result::kMalformed;
      pos_ = gt + 1;
      phase_ = Phase::kXmlAfterName;
      break;
    }
    case Phase::kXmlAfterName:
      if (StartsWith(rest, kParamOpen) || StartsWith(rest, kFunctionClose)) {
        EmitHeader(out);
        phase_ = Phase::kXmlParams;
      } else if (!final && (MayBecome(rest, kParamOpen) || MayBecome(rest, kFunctionClose))) {
        return Result::kNeedMore;
      } else {
        return Result::kMalformed;
      }
      break;
    case Phase::kXmlParams:
      if (StartsWith(rest, kFunctionClose)) {
        CloseCall(out);
        pos_ = i + kFunctionClose.size();
        phase_ = Phase::kEnd;
      } else if (StartsWith(rest, kCallClose)) {
        CloseCall(out);
        pos_ = i + kCallClose.size();
        return Result::kDone;
      } else if (StartsWith(rest, kParamOpen)) {
        size_t start = i + kParamOpen.size();
        size_t gt = all.find('>', start);
        if (gt == std::string_view::npos) return Result::kNeedMore;
        param_ = Trim(all.substr(start, gt - start));
        if (param_.empty() || param_.find('\n') != std::string::npos) {
          CloseCall(out);
          phase_ = Phase::kEnd;
          pos_ = i;
          break;
        }
        Emit(out, std::string(n_params_++ == 0 ? "{" : ",") +
                      Json(param_).dump(-1, ' ', false, Json::error_handler_t::replace) + ":");
        value_string_ = StreamsAsString(ParamSchema(param_));
        value_started_ = false;
        pos_ = gt + 1;
        phase_ = Phase::kXmlValue;
      } else if (rest.empty() || (!final && (MayBecome(rest, kParamOpen) || MayBecome(rest, kFunctionClose) ||
                                             MayBecome(rest, kCallClose)))) {
        return Result::kNeedMore;
      } else {
        CloseCall(out);  // text that is no parameter: the call ends, the text is the caller's
        phase_ = Phase::kEnd;
        pos_ = i;
      }
      break;
    case Phase::kXmlValue:
      return XmlValue(final, out, progressed);
    case Phase::kJsonKey:
      if (rest.empty()) return Result::kNeedMore;
      if (rest[0] == '}') {
        if (name_.empty() || !EndCallAt(i + 1, out)) return Result::kMalformed;
      } else if (rest[0] == '"') {
        size_t e = StringEnd(rest, 0);
        if (e == std::string_view::npos) return Result::kNeedMore;
        Json key = Json::parse(rest.substr(0, e), nullptr, false);
        if (!key.is_string()) return committed_ ? (CloseCall(out), Result::kDone) : Result::kMalformed;
        key_ = key.get<std::string>();
        pos_ = i + e;
        phase_ = Phase::kJsonColon;
      } else {
        if (!EndCallAt(i, out)) return Result::kMalformed;
      }
      break;
    case Phase::kJsonColon:
      if (rest.empty()) return Result::kNeedMore;
      if (rest[0] != ':') {
        if (!EndCallAt(i, out)) return Result::kMalformed;
        break;
      }
      pos_ = i + 1;
      phase_ = Phase::kJsonValue;
      break;
    case Phase::kJsonValue: {
      if (rest.empty()) return Result::kNeedMore;
      bool args = (key_ == "arguments" || key_ == "parameters") && !have_args_;
      if (args && (rest[0] == '{' || rest[0] == '[')) {
        have_args_ = true;
        args_raw_ = true;
        args_stack_.clear();
        args_in_string_ = args_escape_ = false;
        if (!name_.empty() && !committed_) EmitHeader(out);
        pos_ = i;
        phase_ = Phase::kJsonArgs;
        break;
      }
      size_t e = ValueEnd(rest, final);
      if (e == std::string_view::npos) return Result::kNeedMore;
      if (e == 0) {
        if (!EndCallAt(i, out)) return Result::kMalformed;
        break;
      }
      Json v = Json::parse(rest.substr(0, e), nullptr, false);
      if (key_ == "name" && v.is_string() && name_.empty() && !committed_) {
        name_ = v.get<std::string>();
        if (name_.empty()) return Result::kMalformed;
        if (have_args_) {
          EmitHeader(out);
          Emit(out, held_args_);
          held_args_.clear();
        }
      } else if (args) {
        have_args_ = true;
        std::string text = v.is_string() ? v.get<std::string>() : std::string(rest.substr(0, e));
        if (committed_ || !name_.empty()) {
          if (!committed_) EmitHeader(out);
          Emit(out, text);
        } else {
          held_args_ = text;
        }
      }
      pos_ = i + e;
      phase_ = Phase::kJsonAfterValue;
      break;
    }
    case Phase::kJsonArgs:
      return JsonArgs(final, out, progressed);
    case Phase::kJsonAfterValue:
      if (rest.empty()) return Result::kNeedMore;
      if (rest[0] == ',') {
        pos_ = i + 1;
        phase_ = Phase::kJsonKey;
      } else if (rest[0] == '}') {
        if (name_.empty() || !EndCallAt(i + 1, out)) return Result::kMalformed;
      } else {
        if (!EndCallAt(i, out)) return Result::kMalformed;
      }
      break;
    case Phase::kEnd:
      if (StartsWith(rest, kCallClose)) {
        pos_ = i + kCallClose.size();
        return Result::kDone;
      }
      if (!final && (rest.empty() || MayBecome(rest, kCallClose))) return Result::kNeedMore;
      pos_ = rest.empty() ? all.size() : pos_;
      return Result::kDone;  // anything else after the call is the caller's
  }
  *progressed = true;
  return Result::kNeedMore;
}

Result ToolCallBlockParser::XmlValue(bool final, std::vector<ToolCallDelta>* out, bool* progressed) {
  std::string_view all(buf_);
  if (!value_started_) {
    if (pos_ >= all.size() && !final) return Result::kNeedMore;
    if (pos_ < all.size() && all[pos_] == '\n') ++pos_;
    value_begin_ = pos_;
    value_emitted_ = 0;
    value_started_ = true;
    if (value_string_) Emit(out, "\"");
    *progressed = true;
  }
  std::string_view v = all.substr(value_begin_);
  size_t close = v.find(kParamClose);
  size_t stop = std::min(v.find(kParamOpen), v.find(kFunctionClose));
  size_t vend = std::string_view::npos, after = 0;
  if (close != std::string_view::npos && close < stop) {
    vend = close;
    after = close + kParamClose.size();
  } else if (stop != std::string_view::npos) {
    vend = stop;  // a missing </parameter>: the value ends at the next tag
    after = stop;
  } else if (final) {
    vend = after = v.size();
  }
  if (vend != std::string_view::npos) {
    std::string_view value = v.substr(0, vend);
    if (!value.empty() && value.back() == '\n') value.remove_suffix(1);
    if (value_string_) {
      Emit(out, JsonEscape(value.substr(std::min(value_emitted_, value.size()))) + "\"");
    } else {
      Emit(out, ParameterValue(std::string(value), ParamSchema(param_))
                    .dump(-1, ' ', false, Json::error_handler_t::replace));
    }
    pos_ = value_begin_ + after;
    phase_ = Phase::kXmlParams;
    *progressed = true;
    return Result::kNeedMore;
  }
  if (value_string_) {
    size_t hold = std::max({PartialTagSuffix(v, kParamClose), PartialTagSuffix(v, kParamOpen),
                            PartialTagSuffix(v, kFunctionClose)});
    size_t safe = v.size() - hold;
    if (safe > 0 && v[safe - 1] == '\n') --safe;  // may be the newline before </parameter>
    if (safe > value_emitted_) {
      Emit(out, JsonEscape(v.substr(value_emitted_, safe - value_emitted_)));
      value_emitted_ = safe;
    }
  }
  return Result::kNeedMore;
}

Result ToolCallBlockParser::JsonArgs(bool final, std::vector<ToolCallDelta>* out, bool* progressed) {
  size_t start = pos_;
  bool ended = false;
  while (pos_ < buf_.size() && !ended) {
    char c = buf_[pos_++];
    if (args_in_string_) {
      if (args_escape_) {
        args_escape_ = false;
      } else if (c == '\\') {
        args_escape_ = true;
      } else if (c == '"') {
        args_in_string_ = false;
      }
    } else if (c == '"') {
      args_in_string_ = true;
    } else if (c == '{' || c == '[') {
      args_stack_.push_back(c == '{' ? '}' : ']');
    } else if (c == '}' || c == ']') {
      if (!args_stack_.empty()) args_stack_.pop_back();
      ended = args_stack_.empty();
    }
  }
  std::string text = buf_.substr(start, pos_ - start);
  if (!ended && final) {
    if (args_in_string_) text += '"';
    args_in_string_ = false;
    text.append(args_stack_.rbegin(), args_stack_.rend());
    args_stack_.clear();
  }
  if (committed_) {
    Emit(out, std::move(text));
  } else {
    held_args_ += text;
  }
  if (ended) {
    phase_ = Phase::kJsonAfterValue;
    *progressed = true;
  }
  return Result::kNeedMore;
}

}  // namespace rw::chat
