#include "chat/tool_call_pythonic.h"

#include <cstdint>

#include "chat/text_scan.h"

namespace rw::chat {
namespace {

using Json = nlohmann::ordered_json;
using Result = ToolCallBlock::Result;

bool IsNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsNameChar(char c) { return IsNameStart(c) || (c >= '0' && c <= '9') || c == '.' || c == '-'; }
bool IsIdentChar(char c) { return IsNameStart(c) || (c >= '0' && c <= '9'); }

// n hex digits at s[i]: -1 if one is not a hex digit, -2 if the text ends first.
int64_t Hex(std::string_view s, size_t i, int n) {
  int64_t v = 0;
  for (int k = 0; k < n; ++k) {
    if (i + k >= s.size()) return -2;
    const char c = s[i + k];
    const int d = c >= '0' && c <= '9'   ? c - '0'
                  : c >= 'a' && c <= 'f' ? c - 'a' + 10
                  : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                         : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

// A quoted string at s[*pos] (the quote): Python / JSON escapes; an unknown escape keeps its backslash.
PyLiteral PyString(std::string_view s, size_t* pos, Json* out) {
  const char q = s[*pos];
  std::string v;
  for (size_t i = *pos + 1; i < s.size(); ++i) {
    const char c = s[i];
    if (c == q) {
      *out = v;
      *pos = i + 1;
      return PyLiteral::kOk;
    }
    if (c != '\\') {
      v.push_back(c);
      continue;
    }
    if (i + 1 >= s.size()) return PyLiteral::kIncomplete;
    const char e = s[++i];
    switch (e) {
      case 'n':
        v.push_back('\n');
        break;
      case 't':
        v.push_back('\t');
        break;
      case 'r':
        v.push_back('\r');
        break;
      case 'b':
        v.push_back('\b');
        break;
      case 'f':
        v.push_back('\f');
        break;
      case '0':
        v.push_back('\0');
        break;
      case '\\':
      case '\'':
      case '"':
      case '/':
        v.push_back(e);
        break;
      case 'x':
      case 'u': {
        const int n = e == 'x' ? 2 : 4;
        int64_t cp = Hex(s, i + 1, n);
        if (cp == -2) return PyLiteral::kIncomplete;
        if (cp < 0) return PyLiteral::kBad;
        i += n;
        if (cp >= 0xD800 && cp < 0xDC00) {  // a JSON surrogate pair: "\\uD83D\\uDE00"
          if (i + 1 >= s.size() || (s[i + 1] == '\\' && i + 2 >= s.size())) return PyLiteral::kIncomplete;
          if (s[i + 1] == '\\' && s[i + 2] == 'u') {
            const int64_t lo = Hex(s, i + 3, 4);
            if (lo == -2) return PyLiteral::kIncomplete;
            if (lo >= 0xDC00 && lo < 0xE000) {
              cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
              i += 6;
            }
          }
        }
        AppendUtf8(static_cast<uint32_t>(cp), &v);
        break;
      }
      default:
        v.push_back('\\');
        v.push_back(e);
    }
  }
  return PyLiteral::kIncomplete;
}

// Items of a list / tuple / dict from s[*pos] (just past the opening bracket) up to `close`.
PyLiteral PyItems(std::string_view s, size_t* pos, char close, bool dict, Json* out) {
  *out = dict ? Json::object() : Json::array();
  size_t i = *pos;
  while (true) {
    i = SkipWs(s, i);
    if (i >= s.size()) return PyLiteral::kIncomplete;
    if (s[i] == close) {
      *pos = i + 1;
      return PyLiteral::kOk;
    }
    Json key, value;
    PyLiteral r = ParsePythonLiteral(s, &i, dict ? &key : &value);
    if (r != PyLiteral::kOk) return r;
    if (dict) {
      i = SkipWs(s, i);
      if (i >= s.size()) return PyLiteral::kIncomplete;
      if (s[i] != ':') return PyLiteral::kBad;
      ++i;
      r = ParsePythonLiteral(s, &i, &value);
      if (r != PyLiteral::kOk) return r;
      (*out)[key.is_string() ? key.get<std::string>() : key.dump()] = std::move(value);
    } else {
      out->push_back(std::move(value));
    }
    i = SkipWs(s, i);
    if (i >= s.size()) return PyLiteral::kIncomplete;
    if (s[i] == ',') {
      ++i;
    } else if (s[i] != close) {
      return PyLiteral::kBad;
    }
  }
}

}  // namespace

PyLiteral ParsePythonLiteral(std::string_view s, size_t* pos, Json* out) {
  size_t i = SkipWs(s, *pos);
  if (i >= s.size()) return PyLiteral::kIncomplete;
  const char c = s[i];
  PyLiteral r = PyLiteral::kBad;
  if (c == '"' || c == '\'') {
    r = PyString(s, &i, out);
  } else if (c == '[' || c == '(' || c == '{') {
    ++i;
    r = PyItems(s, &i, c == '[' ? ']' : c == '(' ? ')' : '}', c == '{', out);
  } else if (IsNameStart(c)) {
    size_t j = i;
    while (j < s.size() && IsIdentChar(s[j])) ++j;
    if (j == s.size()) return PyLiteral::kIncomplete;  // the word may go on
    const std::string_view w = s.substr(i, j - i);
    if (w == "True" || w == "true")
      *out = true;
    else if (w == "False" || w == "false")
      *out = false;
    else if (w == "None" || w == "null")
      *out = nullptr;
    else
      return PyLiteral::kBad;
    i = j;
    r = PyLiteral::kOk;
  } else if ((c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.') {
    size_t j = i;
    while (j < s.size() && ((s[j] >= '0' && s[j] <= '9') || s[j] == '.' || s[j] == 'e' || s[j] == 'E' ||
                            s[j] == '-' || s[j] == '+'))
      ++j;
    if (j == s.size()) return PyLiteral::kIncomplete;  // more digits may come
    std::string num(s.substr(i, j - i));
    if (num[0] == '+') num.erase(0, 1);
    if (!num.empty() && num[0] == '.') num.insert(0, "0");
    if (num.size() > 1 && num[0] == '-' && num[1] == '.') num.insert(1, "0");
    if (!num.empty() && num.back() == '.') num.push_back('0');
    Json v = Json::parse(num, nullptr, /*allow_exceptions=*/false);
    if (v.is_discarded() || !v.is_number()) return PyLiteral::kBad;
    *out = std::move(v);
    i = j;
    r = PyLiteral::kOk;
  }
  if (r == PyLiteral::kOk) *pos = i;
  return r;
}

void PythonicCallsParser::CloseCall(std::vector<ToolCallDelta>* out) {
  out->push_back({CallIndex(), "", n_args_ == 0 ? "{}" : "}"});
  ++n_calls_;
  phase_ = Phase::kAfterCall;
}

Result PythonicCallsParser::EndOfOutput(std::vector<ToolCallDelta>* out) {
  if (phase_ == Phase::kArgs) CloseCall(out);
  return EndAt(buf_.size());
}

Result PythonicCallsParser::Step(bool final, std::vector<ToolCallDelta>* out, bool* progressed) {
  std::string_view all(buf_);
  const size_t i = SkipWs(all, pos_);
  std::string_view rest = all.substr(i);
  if (rest.empty()) return Result::kNeedMore;  // Feed() ends the block at the end of output
  switch (phase_) {
    case Phase::kOpen:
      if (rest[0] != '[' && !IsNameStart(rest[0])) return Result::kMalformed;
      bracketed_ = rest[0] == '[';
      pos_ = bracketed_ ? i + 1 : i;
      phase_ = Phase::kCall;
      break;
    case Phase::kCall:
      return CallName(i, final, out, progressed);
    case Phase::kArgs:
      return Argument(i, out, progressed);
    case Phase::kAfterCall:
      phase_ = NextElement(i, rest) ? Phase::kCall : Phase::kClose;
      break;
    case Phase::kClose:
      return ClosingTag(i, rest, final);
  }
  *progressed = true;
  return Result::kNeedMore;
}

Result PythonicCallsParser::CallName(size_t i, bool final, std::vector<ToolCallDelta>* out,
                                     bool* progressed) {
  std::string_view all(buf_);
  if (bracketed_ && n_calls_ > 0 && all[i] == ']') {  // a trailing comma
    pos_ = i + 1;
    phase_ = Phase::kClose;
    *progressed = true;
    return Result::kNeedMore;
  }
  if (!IsNameStart(all[i])) return EndAt(pos_);
  size_t j = i;
  while (j < all.size() && IsNameChar(all[j])) ++j;
  const size_t k = SkipWs(all, j);
  if (k == all.size()) return final ? EndAt(pos_) : Result::kNeedMore;
  if (all[k] != '(') return EndAt(pos_);
  out->push_back({CallIndex(), std::string(all.substr(i, j - i)), ""});
  n_args_ = 0;
  pos_ = k + 1;
  phase_ = Phase::kArgs;
  *progressed = true;
  return Result::kNeedMore;
}

Result PythonicCallsParser::Argument(size_t i, std::vector<ToolCallDelta>* out, bool* progressed) {
  std::string_view all(buf_);
  if (all[i] == ')' || (all[i] == ',' && n_args_ > 0)) {  // the call's end, or between arguments
    pos_ = i + 1;
    if (all[i] == ')') CloseCall(out);
    *progressed = true;
    return Result::kNeedMore;
  }
  if (all[i] == ']' && bracketed_) {  // the ")" left out: the list's end closes the call
    CloseCall(out);
    *progressed = true;
    return Result::kNeedMore;
  }
  size_t j = i;
  while (j < all.size() && IsIdentChar(all[j])) ++j;
  const size_t k = SkipWs(all, j);
  // The text ends inside the argument's name: wait (at the end of output the call closes without it).
  if (k == all.size()) return Result::kNeedMore;
  if (j == i || all[k] != '=') {  // not an argument: the call and the block end here
    CloseCall(out);
    return EndAt(i);
  }
  size_t p = k + 1;
  Json value;
  const PyLiteral r = ParsePythonLiteral(all, &p, &value);
  if (r == PyLiteral::kIncomplete)
    return Result::kNeedMore;  // at the end of output: the call closes without it
  if (r == PyLiteral::kBad) {
    CloseCall(out);
    return EndAt(i);
  }
  std::string text = n_args_ == 0 ? "{" : ",";
  text += Json(std::string(all.substr(i, j - i))).dump() + ":" +
          value.dump(-1, ' ', false, Json::error_handler_t::replace);
  out->push_back({CallIndex(), "", std::move(text)});
  ++n_args_;
  pos_ = p;
  *progressed = true;
  return Result::kNeedMore;
}

}  // namespace rw::chat
