// GBNF parser: text -> Grammar. A rule runs from `name ::=` to the next `name ::=` (so alternatives may
// continue on the next line, as in llama.cpp's grammars). Groups and repetitions become anonymous rules:
//   X*  -> R ::= X R | ""      X+ -> X R (R as X*)      X? -> R ::= X | ""
//   X{m,n} -> m copies of X, then n - m nested optionals (X{m,} -> m copies, then X*).
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <optional>

#include "grammar/grammar.h"

namespace rw::grammar {

bool CharClass::Matches(uint32_t cp) const {
  bool in = std::any_of(ranges.begin(), ranges.end(),
                        [&](const auto& r) { return cp >= r.first && cp <= r.second; });
  return in != negated;
}

namespace {

bool Intersects(const std::vector<std::pair<uint32_t, uint32_t>>& ranges, uint32_t lo, uint32_t hi) {
  return std::any_of(ranges.begin(), ranges.end(),
                     [&](const auto& r) { return r.first <= hi && r.second >= lo; });
}

// Every code point of [lo, hi] lies in some range.
bool Covers(const std::vector<std::pair<uint32_t, uint32_t>>& ranges, uint32_t lo, uint32_t hi) {
  std::vector<std::pair<uint32_t, uint32_t>> rs = ranges;
  std::sort(rs.begin(), rs.end());
  uint64_t next = lo;
  for (const auto& r : rs) {
    if (r.second < next) continue;
    if (r.first > next) return next > hi;
    next = static_cast<uint64_t>(r.second) + 1;
    if (next > hi) return true;
  }
  return next > hi;
}

}  // namespace

bool CharClass::MatchesSome(uint32_t lo, uint32_t hi) const {
  return negated ? !Covers(ranges, lo, hi) : Intersects(ranges, lo, hi);
}

bool CharClass::MatchesAll(uint32_t lo, uint32_t hi) const {
  return negated ? !Intersects(ranges, lo, hi) : Covers(ranges, lo, hi);
}

namespace {

constexpr size_t kMaxRepeat = 10000;  // {m,n} bounds above this are refused (they expand into copies)

using Seq = std::vector<Element>;

class Parser {
 public:
  Parser(std::string_view text, const GbnfLimits& limits) : s_(text), limits_(limits) {}

  Expected<std::shared_ptr<const Grammar>> Run(std::string_view root_name) {
    SkipSpace();
    while (pos_ < s_.size()) {
      std::string name = Name();
      if (name.empty()) return Fail("expected a rule name");
      SkipSpace();
      if (s_.substr(pos_, 3) != "::=") return Fail("expected '::=' after '" + name + "'");
      pos_ += 3;
      uint32_t id = RuleId(name);
      if (defined_[id]) return Fail("rule '" + name + "' is defined twice");
      defined_[id] = true;
      std::vector<Seq> alts;
      if (!Alternatives(/*nested=*/false, &alts)) {
        if (over_limit_) return Error::OutOfRange(error_);
        return Fail(error_);
      }
      rules_[id] = std::move(alts);
      SkipSpace();
    }
    if (over_limit_) return Error::OutOfRange(error_);
    for (size_t i = 0; i < names_.size(); ++i)
      if (!defined_[i]) return Error::InvalidArgument("grammar: undefined rule '" + names_[i] + "'");
    auto it = ids_.find(std::string(root_name));
    if (it == ids_.end()) return Error::InvalidArgument("grammar: no '" + std::string(root_name) + "' rule");
    auto g = std::make_shared<Grammar>();
    g->classes = std::move(classes_);
    g->rule_names = names_;
    g->root = it->second;
    g->alts.resize(rules_.size());
    for (size_t r = 0; r < rules_.size(); ++r) {
      for (size_t a = 0; a < rules_[r].size(); ++a) {
        g->alts[r].push_back(static_cast<uint32_t>(g->elements.size()));
        for (const Element& e : rules_[r][a]) g->elements.push_back(e);
        g->elements.push_back({a + 1 < rules_[r].size() ? Op::kAlt : Op::kEnd, 0});
      }
    }
    if (auto lr = LeftRecursive(*g))
      return Error::InvalidArgument("grammar: rule '" + *lr + "' is left-recursive");
    return std::shared_ptr<const Grammar>(std::move(g));
  }

 private:
  Error Fail(const std::string& what) const {
    size_t line =
        1 + static_cast<size_t>(std::count(
                s_.begin(), s_.begin() + static_cast<std::ptrdiff_t>(std::min(pos_, s_.size())), '\n'));
    return Error::InvalidArgument("grammar: " + what + " (line " + std::to_string(line) + ")");
  }
  bool SetError(std::string e) {
    if (error_.empty()) error_ = std::move(e);
    return false;
  }
  // Counts `n` more elements; false (and the error) past the limit.
  bool Charge(size_t n) {
    if (n <= limits_.max_elements - std::min(elements_, limits_.max_elements)) {
      elements_ += n;
      return true;
    }
    over_limit_ = true;
    error_ = "grammar: expands to more than " + std::to_string(limits_.max_elements) + " elements";
    return false;
  }

  static bool IsNameChar(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
  }
  void SkipSpace() {
    while (pos_ < s_.size()) {
      char c = s_[pos_];
      if (c == '#') {
        while (pos_ < s_.size() && s_[pos_] != '\n') ++pos_;
      } else if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
        ++pos_;
      } else {
        break;
      }
    }
  }
  std::string Name() {
    size_t b = pos_;
    while (pos_ < s_.size() && IsNameChar(s_[pos_])) ++pos_;
    return std::string(s_.substr(b, pos_ - b));
  }
  // At a rule definition (`name ::=`)? Used to end the previous rule.
  bool AtDefinition() const {
    size_t p = pos_;
    while (p < s_.size() && IsNameChar(s_[p])) ++p;
    if (p == pos_) return false;
    while (p < s_.size() && (s_[p] == ' ' || s_[p] == '\t')) ++p;
    return s_.substr(p, 3) == "::=";
  }
  uint32_t RuleId(const std::string& name) {
    auto [it, fresh] = ids_.emplace(name, static_cast<uint32_t>(names_.size()));
    if (fresh && names_.size() >= limits_.max_rules && !over_limit_) {
      over_limit_ = true;
      error_ = "grammar: expands to more than " + std::to_string(limits_.max_rules) + " rules";
    }
    if (fresh) {
      names_.push_back(name);
      rules_.emplace_back();
      defined_.push_back(false);
    }
    return it->second;
  }
  uint32_t NewRule(std::vector<Seq> alts) {
    uint32_t id = RuleId("~" + std::to_string(names_.size()));
    rules_[id] = std::move(alts);
    defined_[id] = true;
    return id;
  }
  uint32_t AddClass(CharClass c) {
    classes_.push_back(std::move(c));
    return static_cast<uint32_t>(classes_.size() - 1);
  }
  Element Literal(uint32_t cp) { return {Op::kClass, AddClass({false, {{cp, cp}}})}; }

  // One UTF-8 character or escape inside a literal or class.
  bool Char(uint32_t* cp) {
    if (pos_ >= s_.size()) return SetError("unexpected end of grammar");
    unsigned char c = static_cast<unsigned char>(s_[pos_]);
    if (c == '\\') {
      if (++pos_ >= s_.size()) return SetError("unfinished escape");
      char e = s_[pos_++];
      auto hex = [&](int n) {
        uint32_t v = 0;
        for (int i = 0; i < n; ++i) {
          if (pos_ >= s_.size() || !std::isxdigit(static_cast<unsigned char>(s_[pos_])))
            return SetError("bad hex escape");
          char h = s_[pos_++];
          v = v * 16 + static_cast<uint32_t>(h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
        }
        *cp = v;
        return true;
      };
      switch (e) {
        case 'n':
          *cp = '\n';
          return true;
        case 't':
          *cp = '\t';
          return true;
        case 'r':
          *cp = '\r';
          return true;
        case 'x':
          return hex(2);
        case 'u':
          return hex(4);
        case 'U':
          return hex(8);
        case '\\':
        case '"':
        case '[':
        case ']':
        case '-':
        case '^':
        case '/':
        case '\'':
          *cp = static_cast<uint32_t>(e);
          return true;
        default:
          return SetError(std::string("unknown escape '\\") + e + "'");
      }
    }
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 0 || pos_ + len > s_.size()) return SetError("invalid UTF-8 in grammar");
    uint32_t v = len == 1 ? c : c & (0x7F >> len);
    for (int i = 1; i < len; ++i) v = (v << 6) | (static_cast<unsigned char>(s_[pos_ + i]) & 0x3F);
    pos_ += len;
    *cp = v;
    return true;
  }

  bool Alternatives(bool nested, std::vector<Seq>* alts) {
    alts->emplace_back();
    if (!Sequence(nested, &alts->back())) return false;
    while (pos_ < s_.size() && s_[pos_] == '|') {
      ++pos_;
      alts->emplace_back();
      if (!Sequence(nested, &alts->back())) return false;
    }
    return true;
  }

  bool Sequence(bool nested, Seq* seq) {
    size_t last = seq->size();  // start of the last atom (for a postfix operator)
    bool have_atom = false;
    while (true) {
      SkipSpace();
      if (pos_ >= s_.size()) return true;
      char c = s_[pos_];
      if (c == '|' || (c == ')' && nested)) return true;
      if (!nested && AtDefinition()) return true;
      if (c == '"') {
        ++pos_;
        last = seq->size();
        while (pos_ < s_.size() && s_[pos_] != '"') {
          uint32_t cp = 0;
          if (!Char(&cp) || !Charge(1)) return false;
          seq->push_back(Literal(cp));
        }
        if (pos_ >= s_.size()) return SetError("unterminated string literal");
        ++pos_;
        have_atom = true;
      } else if (c == '[') {
        ++pos_;
        CharClass cls;
        if (pos_ < s_.size() && s_[pos_] == '^') {
          cls.negated = true;
          ++pos_;
        }
        while (pos_ < s_.size() && s_[pos_] != ']') {
          uint32_t lo = 0, hi = 0;
          if (!Char(&lo)) return false;
          hi = lo;
          if (pos_ + 1 < s_.size() && s_[pos_] == '-' && s_[pos_ + 1] != ']') {
            ++pos_;
            if (!Char(&hi)) return false;
          }
          if (hi < lo) return SetError("character range out of order");
          cls.ranges.push_back({lo, hi});
        }
        if (pos_ >= s_.size()) return SetError("unterminated character class");
        ++pos_;
        if (!Charge(1)) return false;
        last = seq->size();
        seq->push_back({Op::kClass, AddClass(std::move(cls))});
        have_atom = true;
      } else if (c == '.') {
        ++pos_;
        if (!Charge(1)) return false;
        last = seq->size();
        seq->push_back({Op::kClass, AddClass({true, {}})});
        have_atom = true;
      } else if (c == '(') {
        ++pos_;
        if (++nesting_ > limits_.max_nesting)
          return SetError("groups nested deeper than " + std::to_string(limits_.max_nesting) + " levels");
        std::vector<Seq> alts;
        if (!Alternatives(/*nested=*/true, &alts)) return false;
        --nesting_;
        SkipSpace();
        if (pos_ >= s_.size() || s_[pos_] != ')') return SetError("expected ')'");
        ++pos_;
        if (!Charge(1)) return false;
        last = seq->size();
        seq->push_back({Op::kRef, NewRule(std::move(alts))});
        have_atom = true;
      } else if (IsNameChar(c)) {
        if (!Charge(1)) return false;
        last = seq->size();
        seq->push_back({Op::kRef, RuleId(Name())});
        have_atom = true;
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (!have_atom) return SetError(std::string("'") + c + "' without anything to repeat");
        size_t lo = 0, hi = SIZE_MAX;
        ++pos_;
        if (c == '+') lo = 1;
        if (c == '?') hi = 1;
        if (c == '{' && !Bounds(&lo, &hi)) return false;
        Seq atom(seq->begin() + static_cast<std::ptrdiff_t>(last), seq->end());
        seq->resize(last);
        if (!Repeat(atom, lo, hi, seq)) return false;
        have_atom = false;
      } else if (c == '<') {
        return SetError("token references (<...>) are not supported");
      } else {
        return SetError(std::string("unexpected '") + c + "'");
      }
    }
  }

  bool Bounds(size_t* lo, size_t* hi) {
    auto number = [&](size_t* out) {
      SkipSpace();
      size_t b = pos_;
      size_t v = 0;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9' && v <= kMaxRepeat)
        v = v * 10 + (s_[pos_++] - '0');
      *out = v;
      return pos_ > b;
    };
    if (!number(lo)) return SetError("expected a number in {m,n}");
    SkipSpace();
    *hi = *lo;
    if (pos_ < s_.size() && s_[pos_] == ',') {
      ++pos_;
      SkipSpace();
      *hi = SIZE_MAX;
      if (pos_ < s_.size() && s_[pos_] != '}' && !number(hi)) return SetError("expected a number in {m,n}");
      SkipSpace();
    }
    if (pos_ >= s_.size() || s_[pos_] != '}') return SetError("expected '}'");
    ++pos_;
    if (*lo > kMaxRepeat || (*hi != SIZE_MAX && *hi > kMaxRepeat))
      return SetError("repetition bound over 10000");
    if (*hi < *lo) return SetError("repetition {m,n} with n < m");
    return true;
  }

  // Charges the copies before making them: nested repetitions multiply, and the bound must hold before the
  // memory is spent.
  bool Repeat(const Seq& atom, size_t lo, size_t hi, Seq* seq) {
    const size_t copies = hi == SIZE_MAX ? lo + 1 : hi;
    if (!Charge(copies > 0 && atom.size() > limits_.max_elements / copies ? limits_.max_elements + 1
                                                                        : copies * (atom.size() + 1)))
      return false;
    if (hi != SIZE_MAX && hi - lo > limits_.max_rules) {
      over_limit_ = true;
      error_ = "grammar: expands to more than " + std::to_string(limits_.max_rules) + " rules";
      return false;
    }
    for (size_t i = 0; i < lo; ++i) seq->insert(seq->end(), atom.begin(), atom.end());
    if (hi == SIZE_MAX) {  // R ::= atom R | ""
      uint32_t r = RuleId("~" + std::to_string(names_.size()));
      defined_[r] = true;
      Seq rec = atom;
      rec.push_back({Op::kRef, r});
      rules_[r] = {rec, Seq{}};
      seq->push_back({Op::kRef, r});
      return !over_limit_;
    }
    // Nested optionals, innermost first: R_k ::= atom R_{k-1} | "".
    std::optional<uint32_t> inner;
    for (size_t i = lo; i < hi; ++i) {
      Seq body = atom;
      if (inner) body.push_back({Op::kRef, *inner});
      inner = NewRule({body, Seq{}});
    }
    if (inner) seq->push_back({Op::kRef, *inner});
    return !over_limit_;
  }

  // A rule that can reach itself without consuming a character cannot be matched by a stack machine.
  static std::optional<std::string> LeftRecursive(const Grammar& g) {
    const size_t n = g.alts.size();
    std::vector<bool> nullable(n, false);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < n; ++r) {
        if (nullable[r]) continue;
        for (uint32_t p : g.alts[r]) {
          bool all = true;
          for (; !g.EndsAlternative(p); ++p)
            if (g.elements[p].op != Op::kRef || !nullable[g.elements[p].value]) {
              all = false;
              break;
            }
          if (all) {
            nullable[r] = changed = true;
            break;
          }
        }
      }
    }
    // first[r]: rules r may start with (through nullable prefixes).
    std::vector<std::vector<uint32_t>> first(n);
    for (size_t r = 0; r < n; ++r)
      for (uint32_t p : g.alts[r])
        for (; !g.EndsAlternative(p); ++p) {
          if (g.elements[p].op != Op::kRef) break;
          first[r].push_back(g.elements[p].value);
          if (!nullable[g.elements[p].value]) break;
        }
    // Depth-first search for a cycle, with an explicit stack (a chain of many rules must not overflow the
    // thread's stack).
    std::vector<int> state(n, 0);  // 0 new, 1 on the path, 2 done
    std::optional<std::string> found;
    std::vector<std::pair<uint32_t, size_t>> path;  // rule, next index into first[rule]
    for (uint32_t r0 = 0; r0 < n && !found; ++r0) {
      if (state[r0] != 0) continue;
      state[r0] = 1;
      path.push_back({r0, 0});
      while (!path.empty() && !found) {
        auto& [r, next] = path.back();
        if (next == first[r].size()) {
          state[r] = 2;
          path.pop_back();
          continue;
        }
        const uint32_t q = first[r][next++];
        if (state[q] == 1) {
          found = g.rule_names[q];
        } else if (state[q] == 0) {
          state[q] = 1;
          path.push_back({q, 0});
        }
      }
    }
    return found;
  }

  std::string_view s_;
  GbnfLimits limits_;
  size_t pos_ = 0;
  size_t elements_ = 0;  // charged so far (copies dropped later included: the bound is on work done)
  size_t nesting_ = 0;   // open groups
  bool over_limit_ = false;
  std::string error_;
  std::map<std::string, uint32_t> ids_;
  std::vector<std::string> names_;
  std::vector<std::vector<Seq>> rules_;
  std::vector<bool> defined_;
  std::vector<CharClass> classes_;
};

}  // namespace

Expected<std::shared_ptr<const Grammar>> ParseGbnf(std::string_view text, std::string_view root,
                                                   const GbnfLimits& limits) {
  Parser p(text, limits);
  return p.Run(root);
}

}  // namespace rw::grammar
