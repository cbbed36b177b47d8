// Item access and container operators with Python semantics.
#include <algorithm>

#include "chat/jinja_interp.h"
#include "chat/jinja_strings.h"

namespace rw::chat::jinja {

namespace {

constexpr std::string_view kNoElement = " object has no element ";

// jinja2's message for an index past a sequence's end (the undefined it yields remembers it).
std::string NoElement(const char* type, const Value& key) {
  return std::string(type) + std::string(kNoElement) + key.ToString();
}

}  // namespace

bool IsMissingElement(const Value& v) {
  return v.is_undefined() && v.undefined_hint().find(kNoElement) != std::string::npos;
}

Value GetAttr(const Value& obj, const std::string& name) {
  if (obj.is_dict()) {
    if (const Value* v = obj.as_dict()->Find(name)) return *v;
  }
  if (obj.is_undefined()) {
    return Value::MakeUndefined(obj.undefined_hint().empty() ? name : obj.undefined_hint() + "." + name);
  }
  return Value::MakeUndefined(name);
}

Value GetItem(const Value& obj, const Value& key) {
  if (obj.is_dict()) {
    if (key.is_string()) return GetAttr(obj, key.as_string());
    if (const Value* v = obj.as_dict()->Find(key.ToString())) return *v;
    return Value::MakeUndefined(key.ToString());
  }
  if ((obj.is_list() || obj.is_string()) && (key.is_int() || key.is_bool())) {
    int64_t i = key.is_bool() ? int64_t{key.as_bool()} : key.as_int();
    if (obj.is_list()) {
      const auto& l = *obj.as_list();
      int64_t n = static_cast<int64_t>(l.size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value::MakeUndefined(NoElement("list", key));
      return l[static_cast<size_t>(i)];
    }
    const std::string& s = obj.as_string();
    if (IsAscii(s)) {
      int64_t n = static_cast<int64_t>(s.size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value::MakeUndefined(NoElement("str", key));
      return Value(std::string(1, s[static_cast<size_t>(i)]));
    }
    auto cps = CodePoints(s);
    int64_t n = static_cast<int64_t>(cps.size());
    if (i < 0) i += n;
    if (i < 0 || i >= n) return Value::MakeUndefined(NoElement("str", key));
    return Value(cps[static_cast<size_t>(i)]);
  }
  if (obj.is_undefined()) return obj;
  if (key.is_string()) return GetAttr(obj, key.as_string());
  return Value::MakeUndefined(key.ToString());
}

namespace {

// Python slice.indices(): normalised start, stop for a sequence of length n and step.
void SliceIndices(int64_t n, const Value& start, const Value& stop, int64_t step, int64_t* b, int64_t* e) {
  auto clamp = [&](const Value& v, int64_t dflt) {
    if (!v.is_int()) return dflt;
    int64_t x = v.as_int();
    if (x < 0) {
      x += n;
      if (x < 0) x = step < 0 ? -1 : 0;
    } else if (x >= n) {
      x = step < 0 ? n - 1 : n;
    }
    return x;
  };
  *b = clamp(start, step < 0 ? n - 1 : 0);
  *e = clamp(stop, step < 0 ? -1 : n);
}

}  // namespace

Value Slice(const Value& obj, const Value& start, const Value& stop, const Value& step_v) {
  int64_t step = step_v.is_int() ? step_v.as_int() : 1;
  if (obj.is_list()) {
    const auto& l = *obj.as_list();
    int64_t b, e;
    SliceIndices(static_cast<int64_t>(l.size()), start, stop, step, &b, &e);
    List out;
    for (int64_t i = b; step > 0 ? i < e : i > e; i += step) out.push_back(l[static_cast<size_t>(i)]);
    return Value::MakeList(std::move(out));
  }
  const std::string& s = obj.as_string();
  if (IsAscii(s)) {
    int64_t b, e;
    SliceIndices(static_cast<int64_t>(s.size()), start, stop, step, &b, &e);
    if (step == 1) return Value(b < e ? s.substr(static_cast<size_t>(b), static_cast<size_t>(e - b)) : "");
    std::string out;
    for (int64_t i = b; step > 0 ? i < e : i > e; i += step) out += s[static_cast<size_t>(i)];
    return Value(std::move(out));
  }
  auto cps = CodePoints(s);
  int64_t b, e;
  SliceIndices(static_cast<int64_t>(cps.size()), start, stop, step, &b, &e);
  std::string out;
  for (int64_t i = b; step > 0 ? i < e : i > e; i += step) out += cps[static_cast<size_t>(i)];
  return Value(std::move(out));
}

bool Contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::kString:
      return item.is_string() && container.as_string().find(item.as_string()) != std::string::npos;
    case Value::Kind::kList:
      for (const auto& x : *container.as_list()) {
        if (x.Equals(item)) return true;
      }
      return false;
    case Value::Kind::kDict:
      return container.as_dict()->Find(item.ToString()) != nullptr;
    default:
      return false;
  }
}

bool Less(const Interpreter& interp, const Value& a, const Value& b) {
  auto num = [](const Value& v) { return v.is_number() || v.is_bool(); };
  auto d = [](const Value& v) { return v.is_bool() ? (v.as_bool() ? 1.0 : 0.0) : v.as_number(); };
  if (num(a) && num(b)) {
    if (a.is_int() && b.is_int()) return a.as_int() < b.as_int();
    return d(a) < d(b);
  }
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();
  if (a.is_list() && b.is_list()) {
    const auto& x = *a.as_list();
    const auto& y = *b.as_list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (Less(interp, x[i], y[i])) return true;
      if (Less(interp, y[i], x[i])) return false;
    }
    return x.size() < y.size();
  }
  if (a.is_undefined()) interp.Fail("'" + a.undefined_hint() + "' is undefined");
  if (b.is_undefined()) interp.Fail("'" + b.undefined_hint() + "' is undefined");
  interp.Fail(std::string("cannot compare ") + a.TypeName() + " and " + b.TypeName());
}

List Iterate(const Interpreter& interp, const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return {};
    case Value::Kind::kList:
      return *v.as_list();
    case Value::Kind::kDict: {
      List keys;
      keys.reserve(v.as_dict()->items.size());
      for (const auto& kv : v.as_dict()->items) keys.emplace_back(kv.first);
      return keys;
    }
    case Value::Kind::kString: {
      List out;
      for (auto& cp : CodePoints(v.as_string())) out.emplace_back(std::move(cp));
      return out;
    }
    default:
      interp.Fail(std::string("a ") + v.TypeName() + " value is not iterable");
  }
}

}  // namespace rw::chat::jinja
