#include "grammar/json_schema.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <vector>

namespace rw::grammar {
namespace {

using json = nlohmann::ordered_json;

constexpr int kMaxDepth = 64;
constexpr int kMaxDigits = 15;  // integers stay exact in a double (JavaScript validators)

const std::set<std::string>& Annotations() {
  static const std::set<std::string> k = {"title",    "description", "default", "examples",    "$schema",
                                          "$id",      "$comment",    "$defs",   "definitions", "deprecated",
                                          "readOnly", "writeOnly",   "strict"};
  return k;
}

Error Unsupported(const std::string& what) {
  return Error::InvalidArgument("JSON schema: " + what + " is not supported");
}

// Every keyword of `s` must be an annotation or in `known`.
Status CheckKeywords(const json& s, std::initializer_list<const char*> known) {
  for (auto it = s.begin(); it != s.end(); ++it) {
    const std::string& k = it.key();
    if (Annotations().count(k)) continue;
    if (std::any_of(known.begin(), known.end(), [&](const char* x) { return k == x; })) continue;
    if (k == "uniqueItems" && it->is_boolean() && !it->get<bool>()) continue;
    return Unsupported("'" + k + "'");
  }
  return Status::Ok();
}

// Reads the count bounds `min_key` / `max_key` (minItems/maxItems, minLength/maxLength): *lo defaults to 0,
// *hi to -1 (unbounded); both at most 1000 (the grammar spells each repetition out).
Status CountBounds(const json& s, const char* min_key, const char* max_key, int64_t* lo, int64_t* hi) {
  *lo = 0;
  *hi = -1;
  for (auto [key, out] : {std::pair<const char*, int64_t*>{min_key, lo}, {max_key, hi}}) {
    if (!s.contains(key)) continue;
    if (!s[key].is_number_integer() || s[key].get<int64_t>() < 0)
      return Error::InvalidArgument(std::string("JSON schema: '") + key + "' must be a non-negative integer");
    *out = s[key].get<int64_t>();
    if (*out > 1000) return Unsupported(std::string("'") + key + "' above 1000");
  }
  if (*hi >= 0 && *hi < *lo)
    return Error::InvalidArgument(std::string("JSON schema: '") + max_key + "' < '" + min_key + "'");
  return Status::Ok();
}

std::string Digits(uint64_t v) { return std::to_string(v); }

// GBNF alternatives for the decimal numbers in [lo, hi] whose digit strings have the same length.
std::string SameLength(const std::string& lo, const std::string& hi) {
  const size_t n = lo.size();
  if (n == 0) return "\"\"";
  auto cls = [](char a, char b) {
    return a == b ? std::string("[") + a + "]" : std::string("[") + a + "-" + b + "]";
  };
  if (n == 1) return cls(lo[0], hi[0]);
  if (lo[0] == hi[0]) return std::string("[") + lo[0] + "] (" + SameLength(lo.substr(1), hi.substr(1)) + ")";
  std::vector<std::string> alts;
  const std::string zeros(n - 1, '0'), nines(n - 1, '9');
  char mid_lo = lo[0], mid_hi = hi[0];
  if (lo.substr(1) != zeros) {
    alts.push_back(std::string("[") + lo[0] + "] (" + SameLength(lo.substr(1), nines) + ")");
    ++mid_lo;
  }
  if (hi.substr(1) != nines) --mid_hi;
  if (mid_lo <= mid_hi) alts.push_back(cls(mid_lo, mid_hi) + " [0-9]{" + std::to_string(n - 1) + "}");
  if (hi.substr(1) != nines)
    alts.push_back(std::string("[") + hi[0] + "] (" + SameLength(zeros, hi.substr(1)) + ")");
  std::string out;
  for (const auto& a : alts) out += (out.empty() ? "" : " | ") + a;
  return out;
}

// Non-negative integers in [lo, hi] (hi = UINT64_MAX: unbounded, up to kMaxDigits digits), as alternatives.
std::string NonNegativeRange(uint64_t lo, uint64_t hi) {
  std::vector<std::string> alts;
  const uint64_t cap = 999999999999999ull;  // kMaxDigits nines
  const bool open = hi == UINT64_MAX || hi > cap;
  const uint64_t top = open ? cap : hi;
  for (size_t len = Digits(lo).size(); len <= Digits(top).size(); ++len) {
    uint64_t first = len == 1 ? 0 : static_cast<uint64_t>(std::pow(10.0, static_cast<double>(len - 1)));
    uint64_t last = static_cast<uint64_t>(std::pow(10.0, static_cast<double>(len))) - 1;
    uint64_t a = std::max(lo, first), b = std::min(top, last);
    if (a > b) continue;
    alts.push_back("(" + SameLength(Digits(a), Digits(b)) + ")");
  }
  std::string out;
  for (const auto& a : alts) out += (out.empty() ? "" : " | ") + a;
  return out;
}

}  // namespace

std::string GbnfLiteral(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"')
      out += "\\\"";
    else if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else if (c == '\r')
      out += "\\r";
    else if (c == '\t')
      out += "\\t";
    else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02X", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string SchemaConverter::Add(const std::string& name, const std::string& body) {
  std::string n = name;
  for (char& c : n)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-')) c = '-';
  if (n.empty()) n = "r";
  std::string unique = n;
  for (int i = 1; rules_.count(unique) && rules_[unique] != body; ++i) unique = n + "-" + std::to_string(i);
  rules_[unique] = body;
  return unique;
}

std::string SchemaConverter::Primitive(const std::string& name) {
  static const std::map<std::string, std::string> k = {
      {"ws", R"(| " " | "\n" [ \t]{0,20})"},
      {"boolean", R"(("true" | "false"))"},
      {"null", R"("null")"},
      {"integer", R"("-"? ([0-9] | [1-9] [0-9]{1,14}))"},
      {"number", R"("-"? ([0-9] | [1-9] [0-9]{1,14}) ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,2})?)"},
      {"char",
       R"([^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" ([0-9a-cA-Ce-fE-F] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2})))"},
      {"string", R"("\"" char* "\"")"},
      {"value", R"(object | array | string | number | boolean | null)"},
      {"object", R"("{" ws ( string ws ":" ws value ( ws "," ws string ws ":" ws value )* )? ws "}")"},
      {"array", R"("[" ws ( value ( ws "," ws value )* )? ws "]")"},
  };
  std::vector<std::string> deps = {name};
  if (name == "string") deps.push_back("char");
  if (name == "value" || name == "object" || name == "array")
    deps = {"value", "object", "array", "string", "char", "number", "boolean", "null", "ws"};
  for (const auto& d : deps) rules_[d] = k.at(d);
  return name;
}

std::string SchemaConverter::AnyValue() { return Primitive("value"); }
std::string SchemaConverter::AnyObject() { return Primitive("object"); }

std::string SchemaConverter::Gbnf() const {
  std::string out;
  for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
  return out;
}

Expected<std::string> SchemaConverter::Rule(const json& schema, const std::string& name,
                                            const json& root_schema) {
  root_ = &root_schema;
  Primitive("ws");
  return Visit(schema, name, 0);
}

Expected<std::string> SchemaConverter::Visit(const json& s, const std::string& name, int depth) {
  if (depth > kMaxDepth) return Error::InvalidArgument("JSON schema: nested deeper than 64 levels");
  if (s.is_boolean()) {
    if (!s.get<bool>()) return Unsupported("a 'false' schema (nothing validates)");
    return AnyValue();
  }
  if (!s.is_object()) return Error::InvalidArgument("JSON schema: a schema must be an object or a boolean");
  if (s.contains("$ref")) {
    REWIND_RETURN_IF_ERROR(CheckKeywords(s, {"$ref"}));
    if (!s["$ref"].is_string()) return Error::InvalidArgument("JSON schema: '$ref' must be a string");
    std::string ref = s["$ref"].get<std::string>();
    if (auto it = refs_.find(ref); it != refs_.end()) return it->second;
    if (ref.rfind("#/", 0) != 0)
      return Unsupported("'$ref' other than a local '#/...' reference ('" + ref + "')");
    const json* target = root_;
    size_t pos = 2;
    while (pos <= ref.size()) {
      size_t slash = ref.find('/', pos);
      std::string part = ref.substr(pos, slash == std::string::npos ? std::string::npos : slash - pos);
      if (!target->is_object() || !target->contains(part))
        return Error::InvalidArgument("JSON schema: '$ref' " + ref + " points nowhere");
      target = &(*target)[part];
      if (slash == std::string::npos) break;
      pos = slash + 1;
    }
    // Reserve the name first so recursive schemas refer to themselves.
    std::string rule = Add("ref-" + ref.substr(2), "\"\"");
    rules_[rule] = "";
    refs_[ref] = rule;
    REWIND_ASSIGN_OR_RETURN(std::string body_rule, Visit(*target, rule + "-body", depth + 1));
    rules_[rule] = body_rule;
    return rule;
  }
  if (s.contains("const")) {
    REWIND_RETURN_IF_ERROR(CheckKeywords(s, {"const", "type"}));
    return Add(name, GbnfLiteral(s["const"].dump()));
  }
  if (s.contains("enum")) {
    REWIND_RETURN_IF_ERROR(CheckKeywords(s, {"enum", "type"}));
    if (!s["enum"].is_array() || s["enum"].empty())
      return Error::InvalidArgument("JSON schema: 'enum' must be a non-empty array");
    std::string body;
    for (const auto& v : s["enum"]) body += (body.empty() ? "" : " | ") + GbnfLiteral(v.dump());
    return Add(name, body);
  }
  for (const char* kw : {"anyOf", "oneOf"}) {
    if (!s.contains(kw)) continue;
    REWIND_RETURN_IF_ERROR(CheckKeywords(s, {kw}));
    if (!s[kw].is_array() || s[kw].empty())
      return Error::InvalidArgument(std::string("JSON schema: '") + kw + "' must be a non-empty array");
    std::string body;
    for (size_t i = 0; i < s[kw].size(); ++i) {
      REWIND_ASSIGN_OR_RETURN(std::string r, Visit(s[kw][i], name + "-" + std::to_string(i), depth + 1));
      body += (body.empty() ? "" : " | ") + r;
    }
    return Add(name, body);
  }
  if (!s.contains("type")) {
    // Untyped: object keywords imply an object, array keywords an array, none: any value.
    if (s.contains("properties") || s.contains("additionalProperties") || s.contains("required"))
      return Object(s, name, depth);
    if (s.contains("items") || s.contains("prefixItems")) return Array(s, name, depth);
    REWIND_RETURN_IF_ERROR(CheckKeywords(s, {}));
    return AnyValue();
  }
  const json& type = s["type"];
  if (type.is_array()) {
    if (type.empty()) return Error::InvalidArgument("JSON schema: 'type' must not be empty");
    std::string body;
    for (const auto& t : type) {
      json one = s;
      one["type"] = t;
      REWIND_ASSIGN_OR_RETURN(
          std::string r, Visit(one, name + "-" + (t.is_string() ? t.get<std::string>() : "t"), depth + 1));
      body += (body.empty() ? "" : " | ") + r;
    }
    return Add(name, body);
  }
  if (!type.is_string()) return Error::InvalidArgument("JSON schema: 'type' must be a string or an array");
  const std::string t = type.get<std::string>();
  if (t == "object") return Object(s, name, depth);
  if (t == "array") return Array(s, name, depth);
  if (t == "string") return String(s, name);
  if (t == "integer") return Integer(s, name);
  if (t == "number") {
    REWIND_RETURN_IF_ERROR(CheckKeywords(s, {"type"}));
    return Primitive("number");
  }
  if (t == "boolean" || t == "null") {
    REWIND_RETURN_IF_ERROR(CheckKeywords(s, {"type"}));
    return Primitive(t);
  }
  return Error::InvalidArgument("JSON schema: unknown type '" + t + "'");
}

Expected<std::string> SchemaConverter::Object(const json& s, const std::string& name, int depth) {
  REWIND_RETURN_IF_ERROR(CheckKeywords(s, {"type", "properties", "required", "additionalProperties"}));
  Primitive("string");
  const json empty = json::object();
  const json& props = s.contains("properties") ? s["properties"] : empty;
  if (!props.is_object()) return Error::InvalidArgument("JSON schema: 'properties' must be an object");
  std::set<std::string> required;
  if (s.contains("required")) {
    if (!s["required"].is_array()) return Error::InvalidArgument("JSON schema: 'required' must be an array");
    for (const auto& r : s["required"]) {
      if (!r.is_string()) return Error::InvalidArgument("JSON schema: 'required' must list strings");
      if (!props.contains(r.get<std::string>()))
        return Unsupported("a required property without a schema in 'properties' ('" + r.get<std::string>() +
                           "')");
      required.insert(r.get<std::string>());
    }
  }
  // Key-value rules in schema order.
  std::vector<std::pair<std::string, bool>> kvs;  // rule, required
  for (auto it = props.begin(); it != props.end(); ++it) {
    REWIND_ASSIGN_OR_RETURN(std::string v, Visit(it.value(), name + "-" + it.key(), depth + 1));
    std::string kv =
        Add(name + "-" + it.key() + "-kv", GbnfLiteral(json(it.key()).dump()) + " ws \":\" ws " + v);
    kvs.push_back({kv, required.count(it.key()) > 0});
  }
  if (kvs.empty()) {
    const json* ap = s.contains("additionalProperties") ? &s["additionalProperties"] : nullptr;
    if (ap && ap->is_boolean() && !ap->get<bool>()) return Add(name, "\"{\" ws \"}\"");
    if (ap && ap->is_object()) {
      REWIND_ASSIGN_OR_RETURN(std::string v, Visit(*ap, name + "-additional", depth + 1));
      std::string kv = Add(name + "-additional-kv", "string ws \":\" ws " + v);
      return Add(name, "\"{\" ws ( " + kv + " ( ws \",\" ws " + kv + " )* )? ws \"}\"");
    }
    return AnyObject();
  }
  // rest_i: properties i.. after at least one was written (each with a leading comma);
  // first_i: properties i.. when none was written yet.
  const size_t n = kvs.size();
  std::vector<std::string> rest(n + 1);
  for (size_t i = n; i-- > 0;) {
    std::string item = "ws \",\" ws " + kvs[i].first;
    std::string body = kvs[i].second ? item : "( " + item + " )?";
    if (!rest[i + 1].empty()) body += " " + rest[i + 1];
    rest[i] = Add(name + "-rest-" + std::to_string(i), body);
  }
  std::string first;  // "" = nothing left to write
  for (size_t i = n; i-- > 0;) {
    std::string with = kvs[i].first + (rest[i + 1].empty() ? "" : " " + rest[i + 1]);
    // An optional property may be skipped: then the object continues with first_{i+1} (or ends: ""
    // alternative).
    std::string body = kvs[i].second ? with : with + " | " + first;
    first = Add(name + "-first-" + std::to_string(i), body);
  }
  return Add(name, "\"{\" ws " + first + " ws \"}\"");
}

Expected<std::string> SchemaConverter::Array(const json& s, const std::string& name, int depth) {
  REWIND_RETURN_IF_ERROR(CheckKeywords(s, {"type", "items", "prefixItems", "minItems", "maxItems"}));
  int64_t min_items = 0, max_items = -1;
  REWIND_RETURN_IF_ERROR(CountBounds(s, "minItems", "maxItems", &min_items, &max_items));
  if (s.contains("prefixItems")) {
    const json& pre = s["prefixItems"];
    if (!pre.is_array()) return Error::InvalidArgument("JSON schema: 'prefixItems' must be an array");
    if (s.contains("items") && !(s["items"].is_boolean() && !s["items"].get<bool>()))
      return Unsupported("'items' together with 'prefixItems'");
    if (min_items > static_cast<int64_t>(pre.size()) ||
        (max_items >= 0 && max_items < static_cast<int64_t>(pre.size())))
      return Unsupported("minItems/maxItems with 'prefixItems'");
    std::string body = "\"[\" ws";
    for (size_t i = 0; i < pre.size(); ++i) {
      REWIND_ASSIGN_OR_RETURN(std::string r, Visit(pre[i], name + "-" + std::to_string(i), depth + 1));
      body += (i ? " ws \",\" ws " : " ") + r;
    }
    return Add(name, body + " ws \"]\"");
  }
  std::string item;
  if (s.contains("items")) {
    REWIND_ASSIGN_OR_RETURN(item, Visit(s["items"], name + "-item", depth + 1));
  } else {
    item = AnyValue();
  }
  // item (, item){min-1, max-1}, optional as a whole when min is 0.
  std::string more = "( ws \",\" ws " + item + " )";
  std::string reps;
  const int64_t lo = std::max<int64_t>(min_items - 1, 0);
  if (max_items < 0)
    reps = more + "{" + std::to_string(lo) + ",}";
  else if (max_items == 0)
    return Add(name, "\"[\" ws \"]\"");
  else
    reps = more + "{" + std::to_string(lo) + "," + std::to_string(max_items - 1) + "}";
  std::string list = item + " " + reps;
  if (min_items == 0) list = "( " + list + " )?";
  return Add(name, "\"[\" ws " + list + " ws \"]\"");
}

Expected<std::string> SchemaConverter::String(const json& s, const std::string& name) {
  REWIND_RETURN_IF_ERROR(CheckKeywords(s, {"type", "minLength", "maxLength", "format"}));
  Primitive("string");
  if (s.contains("format")) {
    if (s.contains("minLength") || s.contains("maxLength"))
      return Unsupported("'format' with a length bound");
    std::string f = s["format"].is_string() ? s["format"].get<std::string>() : "";
    const std::string date =
        R"([0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [12] [0-9] | "3" [01] ))";
    const std::string time =
        R"(( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{1,6} )? ( "Z" | [+-] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ))";
    if (f == "date") return Add(name, "\"\\\"\" " + date + " \"\\\"\"");
    if (f == "time") return Add(name, "\"\\\"\" " + time + " \"\\\"\"");
    if (f == "date-time") return Add(name, "\"\\\"\" " + date + " \"T\" " + time + " \"\\\"\"");
    if (f == "uuid")
      return Add(name,
                 R"("\"" [0-9a-f]{8} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{12} "\"")");
    return Unsupported("string format '" + f + "'");
  }
  int64_t lo = 0, hi = -1;
  REWIND_RETURN_IF_ERROR(CountBounds(s, "minLength", "maxLength", &lo, &hi));
  if (lo == 0 && hi < 0) return Primitive("string");
  return Add(
      name, "\"\\\"\" char{" + std::to_string(lo) + "," + (hi >= 0 ? std::to_string(hi) : "") + "} \"\\\"\"");
}

Expected<std::string> SchemaConverter::Integer(const json& s, const std::string& name) {
  REWIND_RETURN_IF_ERROR(
      CheckKeywords(s, {"type", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}));
  if (!s.contains("minimum") && !s.contains("maximum") && !s.contains("exclusiveMinimum") &&
      !s.contains("exclusiveMaximum"))
    return Primitive("integer");
  const double kLimit = 999999999999999.0;
  double lo = -kLimit, hi = kLimit;
  auto bound = [&](const char* k, bool lower, bool exclusive) -> Status {
    if (!s.contains(k)) return Status::Ok();
    if (!s[k].is_number())
      return Error::InvalidArgument(std::string("JSON schema: '") + k + "' must be a number");
    double v = s[k].get<double>();
    if (lower)
      lo = std::max(lo, exclusive ? std::floor(v) + 1 : std::ceil(v));
    else
      hi = std::min(hi, exclusive ? std::ceil(v) - 1 : std::floor(v));
    return Status::Ok();
  };
  REWIND_RETURN_IF_ERROR(bound("minimum", true, false));
  REWIND_RETURN_IF_ERROR(bound("exclusiveMinimum", true, true));
  REWIND_RETURN_IF_ERROR(bound("maximum", false, false));
  REWIND_RETURN_IF_ERROR(bound("exclusiveMaximum", false, true));
  if (lo > hi) return Error::InvalidArgument("JSON schema: no integer lies within the bounds");
  std::vector<std::string> alts;
  if (lo < 0) {  // negative part: "-" then [max(1, -hi), -lo]
    uint64_t a = hi < 0 ? static_cast<uint64_t>(-hi) : 1, b = static_cast<uint64_t>(-lo);
    alts.push_back("\"-\" (" + NonNegativeRange(a, b >= static_cast<uint64_t>(kLimit) ? UINT64_MAX : b) +
                   ")");
  }
  if (hi >= 0) {
    uint64_t a = lo > 0 ? static_cast<uint64_t>(lo) : 0, b = static_cast<uint64_t>(hi);
    alts.push_back("(" + NonNegativeRange(a, b >= static_cast<uint64_t>(kLimit) ? UINT64_MAX : b) + ")");
  }
  std::string body;
  for (const auto& a : alts) body += (body.empty() ? "" : " | ") + a;
  return Add(name, body);
}

Expected<std::string> JsonSchemaToGbnf(const json& schema) {
  SchemaConverter c;
  REWIND_ASSIGN_OR_RETURN(std::string top, c.Rule(schema, "root-value", schema));
  c.Add("root", top);
  return c.Gbnf();
}

}  // namespace rw::grammar
