// Jinja filters and tests, following Jinja2 (and Hugging Face's tojson: no ASCII or HTML escaping).
#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "chat/jinja_interp.h"
#include "chat/jinja_strings.h"

namespace rw::chat::jinja {
namespace {

std::string Str(const Value& v) { return v.ToString(); }

int64_t IntArg(Interpreter& in, const Value& v, int64_t dflt) {
  if (v.is_undefined() || v.is_none()) return dflt;
  if (v.is_int()) return v.as_int();
  if (v.is_bool()) return v.as_bool();
  in.Fail("expected an integer argument");
}

bool BoolArg(const Value& v, bool dflt) { return v.is_undefined() ? dflt : v.Truthy(); }

// Attribute path "a.b" on a value (map/sort/selectattr/join/sum attribute=).
Value AttrPath(const Value& v, const std::string& path) {
  Value cur = v;
  size_t b = 0;
  while (true) {
    size_t e = path.find('.', b);
    std::string part = path.substr(b, e == std::string::npos ? std::string::npos : e - b);
    bool digits =
        !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    cur = digits && cur.is_list() ? GetItem(cur, Value(static_cast<int64_t>(std::atoll(part.c_str()))))
                                  : GetAttr(cur, part);
    if (e == std::string::npos) return cur;
    b = e + 1;
  }
}

// Sort key honouring case_sensitive=false for strings.
Value SortKey(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value(Lower(v.as_string()));
  return v;
}

CallArgs Shift(const CallArgs& args, size_t n) {
  CallArgs out;
  for (size_t i = n; i < args.args.size(); ++i) out.args.push_back(args.args[i]);
  out.kwargs = args.kwargs;
  return out;
}

Value SelectOrReject(Interpreter& in, const Value& v, CallArgs& args, bool select, bool by_attr) {
  List out;
  size_t skip = by_attr ? 1 : 0;
  std::string attr = by_attr ? Str(args.Get(0, "attribute")) : "";
  bool has_test = args.args.size() > skip;
  std::string test = has_test ? Str(args.args[skip]) : "";
  CallArgs targs = Shift(args, skip + 1);
  targs.kwargs.clear();
  for (const auto& item : Iterate(in, v)) {
    Value x = by_attr ? AttrPath(item, attr) : item;
    bool r = has_test ? ApplyTest(in, test, x, targs) : x.Truthy();
    if (r == select) out.push_back(item);
  }
  return Value::MakeList(std::move(out));
}

std::string Indent(const std::string& s, const std::string& pad, bool first, bool blank) {
  std::string out;
  size_t b = 0;
  bool is_first = true;
  while (b <= s.size()) {
    size_t e = s.find('\n', b);
    std::string line = s.substr(b, e == std::string::npos ? std::string::npos : e - b);
    bool all_ws = Strip(line, nullptr, true, true).empty();
    if (!is_first) out += '\n';
    if ((is_first ? first : true) && (blank || !all_ws)) out += pad;
    out += line;
    is_first = false;
    if (e == std::string::npos) break;
    b = e + 1;
  }
  return out;
}

}  // namespace

Value ApplyFilter(Interpreter& in, const std::string& name, const Value& v, CallArgs& args) {
  const std::string& n = name;
  if (n == "trim") {
    const Value& chars = args.Get(0, "chars");
    std::string cs = chars.is_string() ? chars.as_string() : "";
    return Value(Strip(Str(v), chars.is_string() ? &cs : nullptr, true, true));
  }
  if (n == "tojson") {
    const Value& indent = args.Get(0, "indent");
    return Value(ToJsonText(v, indent.is_int() ? static_cast<int>(indent.as_int()) : -1,
                            BoolArg(args.Get(99, "sort_keys"), false)));
  }
  if (n == "safe" || n == "string" || n == "e" || n == "escape" || n == "forceescape") {
    if (n == "safe" && !v.is_undefined()) return v;
    if (n == "string" || n == "safe") return Value(Str(v));
    std::string out;
    for (char c : Str(v)) {
      switch (c) {
        case '&':
          out += "&amp;";
          break;
        case '<':
          out += "&lt;";
          break;
        case '>':
          out += "&gt;";
          break;
        case '"':
          out += "&#34;";
          break;
        case '\'':
          out += "&#39;";
          break;
        default:
          out += c;
      }
    }
    return Value(std::move(out));
  }
  if (n == "items") {
    if (v.is_undefined()) return Value::MakeList();
    if (!v.is_dict()) in.Fail(std::string("items filter expects a mapping, got ") + v.TypeName());
    List out;
    for (const auto& [k, x] : v.as_dict()->items) out.push_back(Value::MakeList({Value(k), x}));
    return Value::MakeList(std::move(out));
  }
  if (n == "length" || n == "count") {
    switch (v.kind()) {
      case Value::Kind::kString:
        return Value(CodePointLength(v.as_string()));
      case Value::Kind::kList:
        return Value(v.as_list()->size());
      case Value::Kind::kDict:
        return Value(v.as_dict()->items.size());
      case Value::Kind::kUndefined:
        return Value(int64_t{0});
      default:
        in.Fail(std::string("object of type ") + v.TypeName() + " has no length");
    }
  }
  if (n == "first" || n == "last") {
    List items = Iterate(in, v);
    if (items.empty()) return Value::MakeUndefined(n);
    return n == "first" ? items.front() : items.back();
  }
  if (n == "join") {
    std::string sep = args.Has(0, "d") ? Str(args.Get(0, "d")) : "";
    const Value& attr = args.Get(1, "attribute");
    std::string out;
    bool first = true;
    for (const auto& x : Iterate(in, v)) {
      if (!first) out += sep;
      first = false;
      (attr.is_undefined() ? x : AttrPath(x, Str(attr))).AppendTo(&out);
    }
    return Value(std::move(out));
  }
  if (n == "lower") return Value(Lower(Str(v)));
  if (n == "upper") return Value(Upper(Str(v)));
  if (n == "title") return Value(Title(Str(v)));
  if (n == "capitalize") return Value(Capitalize(Str(v)));
  if (n == "replace") {
    return Value(Replace(Str(v), Str(args.Get(0, "old")), Str(args.Get(1, "new")),
                         IntArg(in, args.Get(2, "count"), -1)));
  }
  if (n == "default" || n == "d") {
    bool boolean = BoolArg(args.Get(1, "boolean"), false);
    if (v.is_undefined() || (boolean && !v.Truthy())) {
      return args.Has(0, "default_value") ? args.Get(0, "default_value") : Value("");
    }
    return v;
  }
  if (n == "list") return Value::MakeList(Iterate(in, v));
  if (n == "reverse") {
    if (v.is_string()) return Slice(v, Value(), Value(), Value(int64_t{-1}));
    List items = Iterate(in, v);
    std::reverse(items.begin(), items.end());
    return Value::MakeList(std::move(items));
  }
  if (n == "map") {
    List out;
    const Value& attr = args.Get(99, "attribute");
    if (!attr.is_undefined()) {
      const Value& dflt = args.Get(99, "default");
      for (const auto& x : Iterate(in, v)) {
        Value y = AttrPath(x, Str(attr));
        out.push_back(y.is_undefined() && !dflt.is_undefined() ? dflt : y);
      }
      return Value::MakeList(std::move(out));
    }
    if (args.args.empty()) in.Fail("map needs a filter name or attribute=");
    std::string f = Str(args.args[0]);
    CallArgs fargs = Shift(args, 1);
    for (const auto& x : Iterate(in, v)) out.push_back(ApplyFilter(in, f, x, fargs));
    return Value::MakeList(std::move(out));
  }
  if (n == "select") return SelectOrReject(in, v, args, true, false);
  if (n == "reject") return SelectOrReject(in, v, args, false, false);
  if (n == "selectattr") return SelectOrReject(in, v, args, true, true);
  if (n == "rejectattr") return SelectOrReject(in, v, args, false, true);
  if (n == "dictsort") {
    if (!v.is_dict()) in.Fail("dictsort expects a mapping");
    bool cs = BoolArg(args.Get(0, "case_sensitive"), false);
    bool by_value = Str(args.Get(1, "by")) == "value";
    bool rev = BoolArg(args.Get(2, "reverse"), false);
    List items;
    for (const auto& [k, x] : v.as_dict()->items) items.push_back(Value::MakeList({Value(k), x}));
    std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
      size_t i = by_value ? 1 : 0;
      Value ka = SortKey((*a.as_list())[i], cs), kb = SortKey((*b.as_list())[i], cs);
      return rev ? Less(in, kb, ka) : Less(in, ka, kb);
    });
    return Value::MakeList(std::move(items));
  }
  if (n == "sort") {
    bool rev = BoolArg(args.Get(0, "reverse"), false);
    bool cs = BoolArg(args.Get(1, "case_sensitive"), false);
    const Value& attr = args.Get(2, "attribute");
    List items = Iterate(in, v);
    auto key = [&](const Value& x) { return SortKey(attr.is_undefined() ? x : AttrPath(x, Str(attr)), cs); };
    std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
      return rev ? Less(in, key(b), key(a)) : Less(in, key(a), key(b));
    });
    return Value::MakeList(std::move(items));
  }
  if (n == "unique") {
    bool cs = BoolArg(args.Get(0, "case_sensitive"), false);
    const Value& attr = args.Get(1, "attribute");
    List out, keys;
    for (const auto& x : Iterate(in, v)) {
      Value k = SortKey(attr.is_undefined() ? x : AttrPath(x, Str(attr)), cs);
      bool seen = false;
      for (const auto& y : keys) seen |= y.Equals(k);
      if (!seen) {
        keys.push_back(k);
        out.push_back(x);
      }
    }
    return Value::MakeList(std::move(out));
  }
  if (n == "min" || n == "max") {
    List items = Iterate(in, v);
    if (items.empty()) return Value::MakeUndefined(n);
    bool cs = BoolArg(args.Get(0, "case_sensitive"), false);
    const Value& attr = args.Get(1, "attribute");
    auto key = [&](const Value& x) { return SortKey(attr.is_undefined() ? x : AttrPath(x, Str(attr)), cs); };
    Value best = items[0];
    for (const auto& x : items) {
      if (n == "min" ? Less(in, key(x), key(best)) : Less(in, key(best), key(x))) best = x;
    }
    return best;
  }
  if (n == "sum") {
    const Value& attr = args.Get(0, "attribute");
    Value total = args.Has(1, "start") ? args.Get(1, "start") : Value(int64_t{0});
    for (const auto& x : Iterate(in, v)) {
      Value y = attr.is_undefined() ? x : AttrPath(x, Str(attr));
      if (!y.is_number() || !total.is_number()) in.Fail("sum needs numbers");
      total = (total.is_int() && y.is_int()) ? Value(total.as_int() + y.as_int())
                                             : Value(total.as_number() + y.as_number());
    }
    return total;
  }
  if (n == "int") {
    int64_t dflt = IntArg(in, args.Get(0, "default"), 0);
    if (v.is_int()) return v;
    if (v.is_bool()) return Value(int64_t{v.as_bool()});
    if (v.is_float())
      return std::isfinite(v.as_float()) ? Value(static_cast<int64_t>(v.as_float())) : Value(dflt);
    if (v.is_string()) {
      std::string s = Strip(v.as_string(), nullptr, true, true);
      char* end = nullptr;
      long long x = std::strtoll(s.c_str(), &end, 10);
      if (!s.empty() && end && *end == 0) return Value(static_cast<int64_t>(x));
      double d = std::strtod(s.c_str(), &end);
      if (!s.empty() && end && *end == 0 && std::isfinite(d)) return Value(static_cast<int64_t>(d));
    }
    return Value(dflt);
  }
  if (n == "float") {
    const Value& d = args.Get(0, "default");
    double dflt = d.is_number() ? d.as_number() : 0.0;
    if (v.is_number()) return Value(v.as_number());
    if (v.is_bool()) return Value(v.as_bool() ? 1.0 : 0.0);
    if (v.is_string()) {
      std::string s = Strip(v.as_string(), nullptr, true, true);
      char* end = nullptr;
      double x = std::strtod(s.c_str(), &end);
      if (!s.empty() && end && *end == 0) return Value(x);
    }
    return Value(dflt);
  }
  if (n == "abs") {
    if (v.is_int()) return Value(v.as_int() < 0 ? -v.as_int() : v.as_int());
    if (v.is_float()) return Value(std::fabs(v.as_float()));
    in.Fail("abs expects a number");
  }
  if (n == "round") {
    int64_t prec = IntArg(in, args.Get(0, "precision"), 0);
    std::string method = args.Has(1, "method") ? Str(args.Get(1, "method")) : "common";
    if (!v.is_number()) in.Fail("round expects a number");
    double scale = std::pow(10.0, static_cast<double>(prec));
    double x = v.as_number() * scale;
    if (method == "ceil")
      x = std::ceil(x);
    else if (method == "floor")
      x = std::floor(x);
    else
      x = std::nearbyint(x);  // Python round(): half to even
    return Value(x / scale);
  }
  if (n == "indent") {
    const Value& w = args.Get(0, "width");
    std::string pad = w.is_string() ? w.as_string() : std::string(static_cast<size_t>(IntArg(in, w, 4)), ' ');
    return Value(
        Indent(Str(v), pad, BoolArg(args.Get(1, "first"), false), BoolArg(args.Get(2, "blank"), false)));
  }
  if (n == "attr") return GetAttr(v, Str(args.Get(0, "name")));
  if (n == "wordcount") return Value(Split(Str(v), nullptr, -1).size());
  if (n == "center") {
    std::string s = Str(v);
    int64_t w = IntArg(in, args.Get(0, "width"), 80);
    int64_t len = static_cast<int64_t>(CodePointLength(s));
    if (w <= len) return Value(s);
    int64_t left = (w - len) / 2 + ((w - len) % 2 != 0 && w % 2 != 0 ? 1 : 0);
    return Value(std::string(static_cast<size_t>(left), ' ') + s +
                 std::string(static_cast<size_t>(w - len - left), ' '));
  }
  in.Fail("unknown filter '" + n + "'");
}

bool ApplyTest(Interpreter& in, const std::string& n, const Value& v, CallArgs& args) {
  const Value& arg = args.Get(0, "other");
  if (n == "defined") return !v.is_undefined();
  if (n == "undefined") return v.is_undefined();
  if (n == "none") return v.is_none();
  if (n == "boolean") return v.is_bool();
  if (n == "true") return v.is_bool() && v.as_bool();
  if (n == "false") return v.is_bool() && !v.as_bool();
  if (n == "integer") return v.is_int();
  if (n == "float") return v.is_float();
  if (n == "number") return v.is_number() || v.is_bool();
  if (n == "string") return v.is_string();
  if (n == "mapping") return v.is_dict() && !v.as_dict()->is_namespace;
  if (n == "iterable")
    return v.is_list() || v.is_string() || v.is_undefined() || (v.is_dict() && !v.as_dict()->is_namespace);
  if (n == "sequence")
    return v.is_list() || v.is_string() || v.is_undefined() || (v.is_dict() && !v.as_dict()->is_namespace);
  if (n == "callable") return v.is_callable();
  if (n == "sameas") {
    if (v.kind() != arg.kind()) return false;
    if (v.is_list()) return v.as_list() == arg.as_list();
    if (v.is_dict()) return v.as_dict() == arg.as_dict();
    return v.Equals(arg);
  }
  if (n == "eq" || n == "==" || n == "equalto") return v.Equals(arg);
  if (n == "ne" || n == "!=") return !v.Equals(arg);
  if (n == "lt" || n == "<" || n == "lessthan") return Less(in, v, arg);
  if (n == "gt" || n == ">" || n == "greaterthan") return Less(in, arg, v);
  if (n == "le" || n == "<=") return !Less(in, arg, v);
  if (n == "ge" || n == ">=") return !Less(in, v, arg);
  if (n == "in") return Contains(arg.is_undefined() ? args.Get(0, "seq") : arg, v);
  if (n == "divisibleby" || n == "odd" || n == "even") {
    if (!v.is_int()) in.Fail("test '" + n + "' expects an integer");
    if (n == "odd") return v.as_int() % 2 != 0;
    if (n == "even") return v.as_int() % 2 == 0;
    const Value& d = args.Get(0, "num");
    if (!d.is_int() || d.as_int() == 0) in.Fail("divisibleby expects a non-zero integer");
    return v.as_int() % d.as_int() == 0;
  }
  if (n == "lower") return v.is_string() && Lower(v.as_string()) == v.as_string();
  if (n == "upper") return v.is_string() && Upper(v.as_string()) == v.as_string();
  in.Fail("unknown test '" + n + "'");
}

}  // namespace rw::chat::jinja
