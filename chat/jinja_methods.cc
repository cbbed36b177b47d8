// Python methods of strings, lists and dicts that chat templates call, and the global functions.
#include <ctime>
#include <unordered_map>

#include "chat/jinja_interp.h"
#include "chat/jinja_strings.h"

namespace rw::chat::jinja {
namespace {

std::string Str(const Value& v) { return v.ToString(); }

int64_t IntOr(Interpreter& in, const Value& v, int64_t dflt) {
  if (v.is_undefined() || v.is_none()) return dflt;
  if (!v.is_int()) in.Fail("expected an integer argument");
  return v.as_int();
}

Value StrList(std::vector<std::string> parts) {
  List l;
  l.reserve(parts.size());
  for (auto& p : parts) l.emplace_back(std::move(p));
  return Value::MakeList(std::move(l));
}

bool AffixMatch(Interpreter& in, const std::string& s, const Value& arg, bool prefix) {
  auto one = [&](const Value& a) {
    if (!a.is_string()) in.Fail(std::string(prefix ? "startswith" : "endswith") + " expects a string");
    const std::string& p = a.as_string();
    if (p.size() > s.size()) return false;
    return prefix ? s.compare(0, p.size(), p) == 0 : s.compare(s.size() - p.size(), p.size(), p) == 0;
  };
  if (arg.is_list()) {
    for (const auto& a : *arg.as_list()) {
      if (one(a)) return true;
    }
    return false;
  }
  return one(arg);
}

// "{} {0} {name}" with positional and keyword arguments.
std::string Format(Interpreter& in, const std::string& fmt, const CallArgs& args) {
  std::string out;
  size_t auto_idx = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    char c = fmt[i];
    if (c == '{' && i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      ++i;
    } else if (c == '}' && i + 1 < fmt.size() && fmt[i + 1] == '}') {
      out += '}';
      ++i;
    } else if (c == '{') {
      size_t e = fmt.find('}', i);
      if (e == std::string::npos) in.Fail("format: unmatched '{'");
      std::string field = fmt.substr(i + 1, e - i - 1);
      const Value* v = nullptr;
      static const Value kUndef;
      if (field.empty()) {
        v = auto_idx < args.args.size() ? &args.args[auto_idx] : &kUndef;
        ++auto_idx;
      } else if (field[0] >= '0' && field[0] <= '9') {
        size_t k = static_cast<size_t>(std::stoul(field));
        v = k < args.args.size() ? &args.args[k] : &kUndef;
      } else {
        v = &args.Get(SIZE_MAX, field);
      }
      if (v->is_undefined()) in.Fail("format: missing argument '" + field + "'");
      v->AppendTo(&out);
      i = e;
    } else {
      out += c;
    }
  }
  return out;
}

bool StringMethod(Interpreter& in, const std::string& s, const std::string& n, CallArgs& a, Value* r) {
  const Value& a0 = a.Get(0, "");
  auto opt_str = [&](const Value& v, std::string* buf) -> const std::string* {
    if (v.is_undefined() || v.is_none()) return nullptr;
    *buf = Str(v);
    return buf;
  };
  std::string buf;
  if (n == "startswith" || n == "endswith") {
    *r = Value(AffixMatch(in, s, a0, n == "startswith"));
  } else if (n == "strip" || n == "lstrip" || n == "rstrip") {
    *r = Value(Strip(s, opt_str(a0, &buf), n != "rstrip", n != "lstrip"));
  } else if (n == "split" || n == "rsplit") {
    const std::string* sep = opt_str(a.Get(0, "sep"), &buf);
    int64_t maxsplit = IntOr(in, a.Get(1, "maxsplit"), -1);
    *r = StrList(n == "split" ? Split(s, sep, maxsplit) : RSplit(s, sep, maxsplit));
  } else if (n == "splitlines") {
    std::vector<std::string> lines;
    size_t b = 0;
    while (b < s.size()) {
      size_t e = s.find('\n', b);
      if (e == std::string::npos) e = s.size();
      std::string line = s.substr(b, e - b);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      lines.push_back(line);
      b = e + 1;
    }
    *r = StrList(std::move(lines));
  } else if (n == "replace") {
    *r = Value(Replace(s, Str(a0), Str(a.Get(1, "")), IntOr(in, a.Get(2, "count"), -1)));
  } else if (n == "upper") {
    *r = Value(Upper(s));
  } else if (n == "lower") {
    *r = Value(Lower(s));
  } else if (n == "title") {
    *r = Value(Title(s));
  } else if (n == "capitalize") {
    *r = Value(Capitalize(s));
  } else if (n == "find" || n == "rfind" || n == "index") {
    size_t p = n == "rfind" ? s.rfind(Str(a0)) : s.find(Str(a0));
    if (p == std::string::npos && n == "index") in.Fail("substring not found");
    *r = p == std::string::npos
             ? Value(int64_t{-1})
             : Value(static_cast<int64_t>(CodePointLength(std::string_view(s).substr(0, p))));
  } else if (n == "count") {
    *r = Value(CountOf(s, Str(a0)));
  } else if (n == "join") {
    std::string out;
    bool first = true;
    for (const auto& x : Iterate(in, a0)) {
      if (!first) out += s;
      first = false;
      x.AppendTo(&out);
    }
    *r = Value(std::move(out));
  } else if (n == "format") {
    *r = Value(Format(in, s, a));
  } else if (n == "isdigit" || n == "isalpha" || n == "isalnum" || n == "isspace") {
    bool ok = !s.empty();
    for (char c : s) {
      bool d = c >= '0' && c <= '9', al = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
      bool sp = c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
      if (n == "isdigit") ok &= d;
      if (n == "isalpha") ok &= al;
      if (n == "isalnum") ok &= d || al;
      if (n == "isspace") ok &= sp;
    }
    *r = Value(ok);
  } else if (n == "islower" || n == "isupper") {
    bool cased = false, ok = true;
    for (char c : s) {
      bool lo = c >= 'a' && c <= 'z', up = c >= 'A' && c <= 'Z';
      cased |= lo || up;
      ok &= n == "islower" ? !up : !lo;
    }
    *r = Value(ok && cased);
  } else {
    return false;
  }
  return true;
}

bool ListMethod(Interpreter& in, const ListPtr& l, const std::string& n, CallArgs& a, Value* r) {
  const Value& a0 = a.Get(0, "");
  *r = Value(nullptr);
  if (n == "append") {
    l->push_back(a0);
  } else if (n == "extend") {
    for (auto& x : Iterate(in, a0)) l->push_back(std::move(x));
  } else if (n == "insert") {
    int64_t i = IntOr(in, a0, 0), size = static_cast<int64_t>(l->size());
    if (i < 0) i = std::max<int64_t>(0, i + size);
    i = std::min(i, size);
    l->insert(l->begin() + i, a.Get(1, ""));
  } else if (n == "pop") {
    if (l->empty()) in.Fail("pop from empty list");
    int64_t i = IntOr(in, a0, -1), size = static_cast<int64_t>(l->size());
    if (i < 0) i += size;
    if (i < 0 || i >= size) in.Fail("pop index out of range");
    *r = (*l)[static_cast<size_t>(i)];
    l->erase(l->begin() + i);
  } else if (n == "index" || n == "count" || n == "remove") {
    int64_t count = 0, first = -1;
    for (size_t i = 0; i < l->size(); ++i) {
      if ((*l)[i].Equals(a0)) {
        if (first < 0) first = static_cast<int64_t>(i);
        ++count;
      }
    }
    if (n == "count") {
      *r = Value(count);
    } else if (first < 0) {
      in.Fail("list." + n + "(x): x not in list");
    } else if (n == "index") {
      *r = Value(first);
    } else {
      l->erase(l->begin() + first);
    }
  } else if (n == "reverse") {
    std::reverse(l->begin(), l->end());
  } else if (n == "copy") {
    *r = Value::MakeList(*l);
  } else {
    return false;
  }
  return true;
}

bool DictMethod(Interpreter& in, const DictPtr& d, const std::string& n, CallArgs& a, Value* r) {
  const Value& a0 = a.Get(0, "");
  if (n == "items") {
    List out;
    for (const auto& [k, x] : d->items) out.push_back(Value::MakeList({Value(k), x}));
    *r = Value::MakeList(std::move(out));
  } else if (n == "keys") {
    List out;
    for (const auto& kv : d->items) out.emplace_back(kv.first);
    *r = Value::MakeList(std::move(out));
  } else if (n == "values") {
    List out;
    for (const auto& kv : d->items) out.push_back(kv.second);
    *r = Value::MakeList(std::move(out));
  } else if (n == "get") {
    const Value* v = d->Find(Str(a0));
    *r = v ? *v : (a.Has(1, "default") ? a.Get(1, "default") : Value(nullptr));
  } else if (n == "pop") {
    std::string k = Str(a0);
    const Value* v = d->Find(k);
    if (!v && !a.Has(1, "default")) in.Fail("dict.pop: key '" + k + "' not found");
    *r = v ? *v : a.Get(1, "default");
    d->Erase(k);
  } else if (n == "setdefault") {
    std::string k = Str(a0);
    if (!d->Find(k)) d->Set(k, a.Has(1, "default") ? a.Get(1, "default") : Value(nullptr));
    *r = *d->Find(k);
  } else if (n == "update") {
    if (a0.is_dict()) {
      for (const auto& [k, x] : a0.as_dict()->items) d->Set(k, x);
    }
    for (const auto& [k, x] : a.kwargs) d->Set(k, x);
    *r = Value(nullptr);
  } else if (n == "copy") {
    auto c = std::make_shared<Dict>(*d);
    *r = Value(std::move(c));
  } else {
    return false;
  }
  return true;
}

Value Fn(const char* name, std::function<Value(Interpreter&, CallArgs&)> fn) {
  auto c = std::make_shared<Callable>();
  c->name = name;
  c->fn = std::move(fn);
  return Value(std::move(c));
}

Value MakeDictFrom(Interpreter& in, CallArgs& a, bool ns) {
  Value d = ns ? Value::MakeNamespace() : Value::MakeDict();
  if (!a.args.empty()) {
    if (!a.args[0].is_dict()) in.Fail(ns ? "namespace() takes a mapping" : "dict() takes a mapping");
    for (const auto& [k, x] : a.args[0].as_dict()->items) d.as_dict()->Set(k, x);
  }
  for (const auto& [k, x] : a.kwargs) d.as_dict()->Set(k, x);
  return d;
}

}  // namespace

bool CallMethod(Interpreter& in, const Value& obj, const std::string& name, CallArgs& args, Value* result) {
  if (obj.is_string()) return StringMethod(in, obj.as_string(), name, args, result);
  if (obj.is_list()) return ListMethod(in, obj.as_list(), name, args, result);
  if (obj.is_dict() && !obj.as_dict()->is_namespace) return DictMethod(in, obj.as_dict(), name, args, result);
  return false;
}

Value LookupGlobal(const std::string& name) {
  static const std::unordered_map<std::string, Value> kGlobals = [] {
    std::unordered_map<std::string, Value> g;
    g["range"] = Fn("range", [](Interpreter& in, CallArgs& a) -> Value {
      int64_t start = 0, stop, step = 1;
      if (a.args.size() == 1) {
        stop = IntOr(in, a.args[0], 0);
      } else if (a.args.size() >= 2) {
        start = IntOr(in, a.args[0], 0);
        stop = IntOr(in, a.args[1], 0);
        if (a.args.size() >= 3) step = IntOr(in, a.args[2], 1);
      } else {
        in.Fail("range expects 1 to 3 arguments");
      }
      if (step == 0) in.Fail("range() step must not be zero");
      List out;
      for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
        if (out.size() > 10'000'000) in.Fail("range too large");
        out.emplace_back(i);
      }
      return Value::MakeList(std::move(out));
    });
    g["namespace"] = Fn("namespace", [](Interpreter& in, CallArgs& a) { return MakeDictFrom(in, a, true); });
    g["dict"] = Fn("dict", [](Interpreter& in, CallArgs& a) { return MakeDictFrom(in, a, false); });
    g["raise_exception"] = Fn("raise_exception", [](Interpreter& in, CallArgs& a) -> Value {
      throw JinjaError{a.Get(0, "message").ToString(), in.line(), true};
    });
    g["strftime_now"] = Fn("strftime_now", [](Interpreter&, CallArgs& a) -> Value {
      std::time_t t = std::time(nullptr);
      std::tm tm{};
      localtime_r(&t, &tm);
      char buf[256];
      size_t n = std::strftime(buf, sizeof(buf), a.Get(0, "format").ToString().c_str(), &tm);
      return Value(std::string(buf, n));
    });
    return g;
  }();
  auto it = kGlobals.find(name);
  return it == kGlobals.end() ? Value() : it->second;
}

}  // namespace rw::chat::jinja
