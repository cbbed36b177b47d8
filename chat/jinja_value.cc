#include "chat/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace rw::chat::jinja {

Value Value::MakeList(List items) { return Value(std::make_shared<List>(std::move(items))); }
Value Value::MakeDict() { return Value(std::make_shared<Dict>()); }
Value Value::MakeNamespace() {
  auto d = std::make_shared<Dict>();
  d->is_namespace = true;
  return Value(std::move(d));
}

bool Value::Truthy() const {
  switch (kind()) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return as_bool();
    case Kind::kInt:
      return as_int() != 0;
    case Kind::kFloat:
      return as_float() != 0.0;
    case Kind::kString:
      return !as_string().empty();
    case Kind::kList:
      return !as_list()->empty();
    case Kind::kDict:
      return as_dict()->is_namespace || !as_dict()->items.empty();
    case Kind::kCallable:
      return true;
  }
  return false;
}

std::string FormatFloat(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  // sci: [-]D[.DDD]e[+-]XX
  bool neg = sci[0] == '-';
  if (neg) sci.erase(0, 1);
  size_t e = sci.find('e');
  int exp = std::atoi(sci.c_str() + e + 1);
  std::string digits;
  for (size_t i = 0; i < e; ++i) {
    if (sci[i] != '.') digits += sci[i];
  }
  std::string out = neg ? "-" : "";
  int n = static_cast<int>(digits.size());
  if (exp < -4 || exp >= 16) {
    out += digits[0];
    if (n > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof(eb), "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    out += eb;
  } else if (exp < 0) {
    out += "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
  } else if (exp + 1 >= n) {
    out += digits + std::string(static_cast<size_t>(exp + 1 - n), '0') + ".0";
  } else {
    out += digits.substr(0, static_cast<size_t>(exp + 1)) + "." + digits.substr(static_cast<size_t>(exp + 1));
  }
  return out;
}

void Value::AppendTo(std::string* out) const {
  switch (kind()) {
    case Kind::kUndefined:
      return;
    case Kind::kNone:
      *out += "None";
      return;
    case Kind::kBool:
      *out += as_bool() ? "True" : "False";
      return;
    case Kind::kInt:
      *out += std::to_string(as_int());
      return;
    case Kind::kFloat:
      *out += FormatFloat(as_float());
      return;
    case Kind::kString:
      *out += as_string();
      return;
    default:
      *out += Repr();
      return;
  }
}

std::string Value::ToString() const {
  if (is_string()) return as_string();
  std::string s;
  AppendTo(&s);
  return s;
}

namespace {

void ReprString(const std::string& s, std::string* out) {
  char q = '\'';
  if (s.find('\'') != std::string::npos && s.find('"') == std::string::npos) q = '"';
  *out += q;
  for (unsigned char c : s) {
    switch (c) {
      case '\\':
        *out += "\\\\";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\r':
        *out += "\\r";
        break;
      case '\t':
        *out += "\\t";
        break;
      default:
        if (c == static_cast<unsigned char>(q)) {
          *out += '\\';
          *out += static_cast<char>(c);
        } else if (c < 0x20 || c == 0x7f) {
          char b[8];
          std::snprintf(b, sizeof(b), "\\x%02x", c);
          *out += b;
        } else {
          *out += static_cast<char>(c);
        }
    }
  }
  *out += q;
}

void ReprTo(const Value& v, std::string* out) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return;
    case Value::Kind::kString:
      ReprString(v.as_string(), out);
      return;
    case Value::Kind::kList: {
      *out += '[';
      bool first = true;
      for (const auto& x : *v.as_list()) {
        if (!first) *out += ", ";
        first = false;
        ReprTo(x, out);
      }
      *out += ']';
      return;
    }
    case Value::Kind::kDict: {
      if (v.as_dict()->is_namespace) *out += "<Namespace ";
      *out += '{';
      bool first = true;
      for (const auto& [k, x] : v.as_dict()->items) {
        if (!first) *out += ", ";
        first = false;
        ReprString(k, out);
        *out += ": ";
        ReprTo(x, out);
      }
      *out += '}';
      if (v.as_dict()->is_namespace) *out += '>';
      return;
    }
    case Value::Kind::kCallable:
      *out += "<function " + v.as_callable()->name + ">";
      return;
    default:
      v.AppendTo(out);
      return;
  }
}

}  // namespace

std::string Value::Repr() const {
  std::string s;
  ReprTo(*this, &s);
  return s;
}

bool Value::Equals(const Value& o) const {
  if (is_number() && o.is_number()) {
    if (is_int() && o.is_int()) return as_int() == o.as_int();
    return as_number() == o.as_number();
  }
  if (is_bool() && o.is_number()) return (as_bool() ? 1.0 : 0.0) == o.as_number();
  if (is_number() && o.is_bool()) return o.Equals(*this);
  if (kind() != o.kind()) return false;
  switch (kind()) {
    case Kind::kUndefined:
    case Kind::kNone:
      return true;
    case Kind::kBool:
      return as_bool() == o.as_bool();
    case Kind::kString:
      return as_string() == o.as_string();
    case Kind::kList: {
      const auto& a = *as_list();
      const auto& b = *o.as_list();
      if (a.size() != b.size()) return false;
      for (size_t i = 0; i < a.size(); ++i) {
        if (!a[i].Equals(b[i])) return false;
      }
      return true;
    }
    case Kind::kDict: {
      const auto& a = as_dict()->items;
      const auto& b = *o.as_dict();
      if (as_dict() == o.as_dict()) return true;
      if (a.size() != b.items.size()) return false;
      for (const auto& [k, x] : a) {
        const Value* y = b.Find(k);
        if (!y || !x.Equals(*y)) return false;
      }
      return true;
    }
    case Kind::kCallable:
      return as_callable() == o.as_callable();
    default:
      return false;
  }
}

const char* Value::TypeName() const {
  switch (kind()) {
    case Kind::kUndefined:
      return "undefined";
    case Kind::kNone:
      return "none";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "string";
    case Kind::kList:
      return "list";
    case Kind::kDict:
      return as_dict()->is_namespace ? "namespace" : "dict";
    case Kind::kCallable:
      return "callable";
  }
  return "?";
}

const Value* Dict::Find(std::string_view key) const {
  for (const auto& kv : items) {
    if (kv.first == key) return &kv.second;
  }
  return nullptr;
}

Value* Dict::Find(std::string_view key) {
  for (auto& kv : items) {
    if (kv.first == key) return &kv.second;
  }
  return nullptr;
}

void Dict::Set(std::string_view key, Value v) {
  if (Value* x = Find(key)) {
    *x = std::move(v);
  } else {
    items.emplace_back(std::string(key), std::move(v));
  }
}

bool Dict::Erase(std::string_view key) {
  auto it = std::find_if(items.begin(), items.end(), [&](const auto& kv) { return kv.first == key; });
  if (it == items.end()) return false;
  items.erase(it);
  return true;
}

const Value& CallArgs::Get(size_t i, std::string_view name) const {
  static const Value kUndef;
  if (i < args.size()) return args[i];
  for (const auto& [k, v] : kwargs) {
    if (k == name) return v;
  }
  return kUndef;
}

Value FromJson(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
      return Value(nullptr);
    case nlohmann::ordered_json::value_t::boolean:
      return Value(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Value(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<double>(u));
      return Value(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float:
      return Value(j.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return Value(j.get_ref<const std::string&>());
    case nlohmann::ordered_json::value_t::array: {
      List l;
      l.reserve(j.size());
      for (const auto& x : j) l.push_back(FromJson(x));
      return Value::MakeList(std::move(l));
    }
    case nlohmann::ordered_json::value_t::object: {
      auto d = std::make_shared<Dict>();
      d->items.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it) d->items.emplace_back(it.key(), FromJson(it.value()));
      return Value(std::move(d));
    }
    default:
      return Value(nullptr);
  }
}

nlohmann::ordered_json ToJson(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return nullptr;
    case Value::Kind::kBool:
      return v.as_bool();
    case Value::Kind::kInt:
      return v.as_int();
    case Value::Kind::kFloat:
      return v.as_float();
    case Value::Kind::kString:
      return v.as_string();
    case Value::Kind::kList: {
      auto a = nlohmann::ordered_json::array();
      for (const auto& x : *v.as_list()) a.push_back(ToJson(x));
      return a;
    }
    case Value::Kind::kDict: {
      auto o = nlohmann::ordered_json::object();
      for (const auto& [k, x] : v.as_dict()->items) o[k] = ToJson(x);
      return o;
    }
    case Value::Kind::kCallable:
      return nullptr;
  }
  return nullptr;
}

namespace {

void JsonString(const std::string& s, std::string* out) {
  *out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\r':
        *out += "\\r";
        break;
      case '\t':
        *out += "\\t";
        break;
      case '\b':
        *out += "\\b";
        break;
      case '\f':
        *out += "\\f";
        break;
      default:
        if (c < 0x20) {
          char b[8];
          std::snprintf(b, sizeof(b), "\\u%04x", c);
          *out += b;
        } else {
          *out += static_cast<char>(c);
        }
    }
  }
  *out += '"';
}

void JsonTo(const Value& v, int indent, bool sort_keys, int depth, std::string* out) {
  auto newline = [&](int d) {
    *out += '\n';
    out->append(static_cast<size_t>(indent * d), ' ');
  };
  switch (v.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
    case Value::Kind::kCallable:
      *out += "null";
      return;
    case Value::Kind::kBool:
      *out += v.as_bool() ? "true" : "false";
      return;
    case Value::Kind::kInt:
      *out += std::to_string(v.as_int());
      return;
    case Value::Kind::kFloat: {
      double d = v.as_float();
      if (std::isnan(d))
        *out += "NaN";
      else if (std::isinf(d))
        *out += d < 0 ? "-Infinity" : "Infinity";
      else
        *out += FormatFloat(d);
      return;
    }
    case Value::Kind::kString:
      JsonString(v.as_string(), out);
      return;
    case Value::Kind::kList: {
      const auto& l = *v.as_list();
      if (l.empty()) {
        *out += "[]";
        return;
      }
      *out += '[';
      for (size_t i = 0; i < l.size(); ++i) {
        if (i) *out += indent >= 0 ? "," : ", ";
        if (indent >= 0) newline(depth + 1);
        JsonTo(l[i], indent, sort_keys, depth + 1, out);
      }
      if (indent >= 0) newline(depth);
      *out += ']';
      return;
    }
    case Value::Kind::kDict: {
      std::vector<const std::pair<std::string, Value>*> items;
      for (const auto& kv : v.as_dict()->items) items.push_back(&kv);
      if (sort_keys) {
        std::stable_sort(items.begin(), items.end(), [](auto* a, auto* b) { return a->first < b->first; });
      }
      if (items.empty()) {
        *out += "{}";
        return;
      }
      *out += '{';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) *out += indent >= 0 ? "," : ", ";
        if (indent >= 0) newline(depth + 1);
        JsonString(items[i]->first, out);
        *out += ": ";
        JsonTo(items[i]->second, indent, sort_keys, depth + 1, out);
      }
      if (indent >= 0) newline(depth);
      *out += '}';
      return;
    }
  }
}

}  // namespace

std::string ToJsonText(const Value& v, int indent, bool sort_keys) {
  std::string out;
  JsonTo(v, indent, sort_keys, 0, &out);
  return out;
}

}  // namespace rw::chat::jinja
