#include "chat/jinja_lexer.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "chat/text_scan.h"

namespace rw::chat::jinja {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool IsNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsNameChar(char c) { return IsNameStart(c) || IsDigit(c); }

int HexVal(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Lexer {
 public:
  Lexer(std::string_view src, const LexOptions& opt) : src_(src), opt_(opt) {}

  Expected<std::vector<Token>> Run() {
    size_t pos = 0;
    bool strip_next = false;  // the previous tag ended with '-'
    while (true) {
      if (strip_next) {
        while (pos < src_.size() && IsSpace(src_[pos])) ++pos;
        strip_next = false;
      }
      bool line_starting = pos == 0 || src_[pos - 1] == '\n';
      size_t p = FindTagStart(pos);
      std::string_view text = src_.substr(pos, (p == std::string_view::npos ? src_.size() : p) - pos);
      if (p == std::string_view::npos) {
        EmitText(text, pos);
        break;
      }
      char kind = src_[p + 1];
      char mod = p + 2 < src_.size() ? src_[p + 2] : 0;
      if (mod == '-') {
        while (!text.empty() && IsSpace(text.back())) text.remove_suffix(1);
      } else if (opt_.lstrip_blocks && kind != '{' && mod != '+') {
        text = LStripBlock(text, line_starting);
      }
      EmitText(text, pos);
      size_t body = p + 2 + ((mod == '-' || mod == '+') ? 1 : 0);
      size_t end = 0;
      bool end_minus = false, end_plus = false;
      if (kind == '#') {
        size_t c = src_.find("#}", body);
        if (c == std::string_view::npos) return Err(LineAt(p), "unterminated comment");
        end_minus = c > body && src_[c - 1] == '-';
        end_plus = c > body && src_[c - 1] == '+';
        end = c + 2;
      } else {
        auto r = LexTag(kind, p, body, &end, &end_minus, &end_plus);
        if (!r.ok()) return r.error();
        if (kind == '%' && IsRawStart()) {
          auto rr = LexRaw(end, end_minus, &end, &end_minus, &end_plus);
          if (!rr.ok()) return rr.error();
        }
      }
      pos = end;
      if (end_minus) {
        strip_next = true;
      } else if (kind != '{' && opt_.trim_blocks && !end_plus && pos < src_.size() && src_[pos] == '\n') {
        ++pos;
      }
    }
    Token eof;
    eof.type = Tok::kEof;
    eof.line = LineAt(src_.size());
    tokens_.push_back(eof);
    return std::move(tokens_);
  }

 private:
  static Error Err(int line, const std::string& what) {
    return Error::InvalidArgument("template line " + std::to_string(line) + ": " + what);
  }

  // Line number of byte offset `off` (1-based); offsets are visited in increasing order.
  int LineAt(size_t off) {
    if (off < line_pos_) {
      line_pos_ = 0;
      line_ = 1;
    }
    for (; line_pos_ < off && line_pos_ < src_.size(); ++line_pos_) {
      if (src_[line_pos_] == '\n') ++line_;
    }
    return line_;
  }

  size_t FindTagStart(size_t pos) const {
    while (true) {
      size_t p = src_.find('{', pos);
      if (p == std::string_view::npos || p + 1 >= src_.size()) return std::string_view::npos;
      char c = src_[p + 1];
      if (c == '{' || c == '%' || c == '#') return p;
      pos = p + 1;
    }
  }

  std::string_view LStripBlock(std::string_view text, bool line_starting) const {
    size_t nl = text.rfind('\n');
    size_t from = nl == std::string_view::npos ? 0 : nl + 1;
    if (nl == std::string_view::npos && !line_starting) return text;
    for (size_t i = from; i < text.size(); ++i) {
      if (text[i] != ' ' && text[i] != '\t' && text[i] != '\r' && text[i] != '\f' && text[i] != '\v')
        return text;
    }
    return text.substr(0, from);
  }

  void EmitText(std::string_view text, size_t at) {
    if (text.empty()) return;
    Token t;
    t.type = Tok::kText;
    t.text = std::string(text);
    t.line = LineAt(at);
    tokens_.push_back(std::move(t));
  }

  void Push(Tok type, std::string text, size_t at) {
    Token t;
    t.type = type;
    t.text = std::move(text);
    t.line = LineAt(at);
    tokens_.push_back(std::move(t));
  }

  bool IsRawStart() const {
    size_t n = tokens_.size();
    return n >= 3 && tokens_[n - 3].type == Tok::kBlockBegin && tokens_[n - 2].type == Tok::kName &&
           tokens_[n - 2].text == "raw" && tokens_[n - 1].type == Tok::kBlockEnd;
  }

  // After `{% raw %}` ending at `pos`: the text up to `{% endraw %}` is literal.
  Status LexRaw(size_t pos, bool strip_start, size_t* end, bool* end_minus, bool* end_plus) {
    tokens_.resize(tokens_.size() - 3);
    size_t search = pos;
    while (true) {
      size_t p = src_.find("{%", search);
      if (p == std::string_view::npos) return Err(LineAt(pos), "missing {% endraw %}");
      size_t q = p + 2;
      char mod = q < src_.size() ? src_[q] : 0;
      if (mod == '-' || mod == '+') ++q;
      while (q < src_.size() && IsSpace(src_[q])) ++q;
      if (src_.substr(q, 6) != "endraw") {
        search = p + 2;
        continue;
      }
      q += 6;
      while (q < src_.size() && IsSpace(src_[q])) ++q;
      *end_minus = *end_plus = false;
      if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) {
        *end_minus = src_[q] == '-';
        *end_plus = src_[q] == '+';
        ++q;
      }
      if (src_.substr(q, 2) != "%}") return Err(LineAt(q), "expected '%}' after endraw");
      std::string_view text = src_.substr(pos, p - pos);
      if (strip_start) {
        while (!text.empty() && IsSpace(text.front())) text.remove_prefix(1);
      } else if (opt_.trim_blocks && !text.empty() && text.front() == '\n') {
        text.remove_prefix(1);
      }
      if (mod == '-') {
        while (!text.empty() && IsSpace(text.back())) text.remove_suffix(1);
      } else if (opt_.lstrip_blocks && mod != '+') {
        text = LStripBlock(text, false);
      }
      EmitText(text, pos);
      *end = q + 2;
      return Status::Ok();
    }
  }

  Status LexTag(char kind, size_t start, size_t pos, size_t* end, bool* end_minus, bool* end_plus) {
    Push(kind == '%' ? Tok::kBlockBegin : Tok::kVarBegin, "", start);
    int depth = 0;
    const char close = kind == '%' ? '%' : '}';
    while (true) {
      while (pos < src_.size() && IsSpace(src_[pos])) ++pos;
      if (pos >= src_.size())
        return Err(LineAt(start), kind == '%' ? "unterminated '{%' tag" : "unterminated '{{'");
      char c = src_[pos];
      if (depth == 0) {
        size_t q = pos;
        bool minus = false, plus = false;
        if (c == '-' || c == '+') {
          minus = c == '-';
          plus = c == '+';
          ++q;
        }
        if (q + 1 < src_.size() && src_[q] == close && src_[q + 1] == '}') {
          Push(kind == '%' ? Tok::kBlockEnd : Tok::kVarEnd, "", pos);
          *end = q + 2;
          *end_minus = minus;
          *end_plus = plus;
          return Status::Ok();
        }
      }
      if (IsNameStart(c)) {
        size_t b = pos;
        while (pos < src_.size() && IsNameChar(src_[pos])) ++pos;
        Push(Tok::kName, std::string(src_.substr(b, pos - b)), b);
        continue;
      }
      if (IsDigit(c)) {
        REWIND_RETURN_IF_ERROR(LexNumber(&pos));
        continue;
      }
      if (c == '\'' || c == '"') {
        REWIND_RETURN_IF_ERROR(LexString(&pos));
        continue;
      }
      static const char* kTwo[] = {"**", "//", "==", "!=", "<=", ">="};
      bool matched = false;
      for (const char* op : kTwo) {
        if (src_.substr(pos, 2) == op) {
          Push(Tok::kOp, op, pos);
          pos += 2;
          matched = true;
          break;
        }
      }
      if (matched) continue;
      if (std::strchr("+-*/%~<>=.,:|()[]{}!", c) != nullptr) {
        if (c == '(' || c == '[' || c == '{') ++depth;
        if (c == ')' || c == ']' || c == '}') {
          if (depth == 0) return Err(LineAt(pos), std::string("unexpected '") + c + "'");
          --depth;
        }
        Push(Tok::kOp, std::string(1, c), pos);
        ++pos;
        continue;
      }
      return Err(LineAt(pos), std::string("unexpected character '") + c + "'");
    }
  }

  Status LexNumber(size_t* pos_io) {
    size_t pos = *pos_io, b = pos;
    std::string digits;
    bool is_float = false;
    auto take_digits = [&] {
      while (pos < src_.size() && (IsDigit(src_[pos]) || src_[pos] == '_')) {
        if (src_[pos] != '_') digits += src_[pos];
        ++pos;
      }
    };
    take_digits();
    if (pos + 1 < src_.size() && src_[pos] == '.' && IsDigit(src_[pos + 1])) {
      is_float = true;
      digits += '.';
      ++pos;
      take_digits();
    }
    if (pos < src_.size() && (src_[pos] == 'e' || src_[pos] == 'E')) {
      size_t q = pos + 1;
      if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
      if (q < src_.size() && IsDigit(src_[q])) {
        is_float = true;
        digits += 'e';
        digits.append(src_.substr(pos + 1, q - pos - 1));
        pos = q;
        take_digits();
      }
    }
    Token t;
    t.line = LineAt(b);
    t.text = digits;
    if (is_float) {
      t.type = Tok::kFloat;
      t.f = std::strtod(digits.c_str(), nullptr);
    } else {
      t.type = Tok::kInt;
      errno = 0;
      t.i = std::strtoll(digits.c_str(), nullptr, 10);
      if (errno) return Err(t.line, "integer literal out of range");
    }
    tokens_.push_back(std::move(t));
    *pos_io = pos;
    return Status::Ok();
  }

  // Python string literal rules: \n \t \r \\ \' \" \0 \xNN \uNNNN \UNNNNNNNN; unknown escapes stay as
  // written.
  Status LexString(size_t* pos_io) {
    size_t pos = *pos_io;
    char q = src_[pos];
    size_t b = pos++;
    std::string out;
    while (true) {
      if (pos >= src_.size()) return Err(LineAt(b), "unterminated string");
      char c = src_[pos];
      if (c == q) {
        ++pos;
        break;
      }
      if (c != '\\') {
        out += c;
        ++pos;
        continue;
      }
      if (pos + 1 >= src_.size()) return Err(LineAt(b), "unterminated string");
      char e = src_[pos + 1];
      pos += 2;
      switch (e) {
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        case 'r':
          out += '\r';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'v':
          out += '\v';
          break;
        case 'a':
          out += '\a';
          break;
        case '0':
          out += '\0';
          break;
        case '\\':
          out += '\\';
          break;
        case '\'':
          out += '\'';
          break;
        case '"':
          out += '"';
          break;
        case '\n':
          break;  // line continuation
        case 'x':
        case 'u':
        case 'U': {
          int n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          uint32_t cp = 0;
          for (int k = 0; k < n; ++k) {
            int h = pos + k < src_.size() ? HexVal(src_[pos + k]) : -1;
            if (h < 0) return Err(LineAt(b), std::string("bad \\") + e + " escape in string");
            cp = cp * 16 + static_cast<uint32_t>(h);
          }
          pos += static_cast<size_t>(n);
          if (cp > 0x10FFFF) return Err(LineAt(b), "bad unicode escape in string");
          AppendUtf8(cp, &out);
          break;
        }
        default:
          out += '\\';
          out += e;
      }
    }
    Token t;
    t.type = Tok::kString;
    t.text = std::move(out);
    t.line = LineAt(b);
    tokens_.push_back(std::move(t));
    *pos_io = pos;
    return Status::Ok();
  }

  std::string_view src_;
  LexOptions opt_;
  std::vector<Token> tokens_;
  size_t line_pos_ = 0;
  int line_ = 1;
};

}  // namespace

Expected<std::vector<Token>> Lex(std::string_view source, const LexOptions& options) {
  // Jinja's keep_trailing_newline=False: one final newline of the template is dropped.
  if (!source.empty() && source.back() == '\n') {
    source.remove_suffix(1);
    if (!source.empty() && source.back() == '\r') source.remove_suffix(1);
  }
  return Lexer(source, options).Run();
}

}  // namespace rw::chat::jinja
