// Values of the Jinja engine: undefined, none, bool, int, float, string, list, dict (insertion ordered),
// callable. Lists and dicts have reference semantics (shared), like Python objects, so `ns.x = ...` and
// `list.append(...)` are visible through every name bound to them. A namespace is a dict flagged as one.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace rw::chat::jinja {

class Value;
class Interpreter;

using List = std::vector<Value>;

struct Dict;
struct Callable;
using ListPtr = std::shared_ptr<List>;
using DictPtr = std::shared_ptr<Dict>;
using CallablePtr = std::shared_ptr<Callable>;

struct Undefined {
  std::string hint;  // the name or attribute that was missing, for error messages
};
struct NoneT {};

class Value {
 public:
  enum class Kind : uint8_t { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kCallable };

  Value() = default;                                 // undefined
  Value(std::nullptr_t) : v_(NoneT{}) {}             // NOLINT
  Value(bool b) : v_(b) {}                           // NOLINT
  Value(int v) : v_(int64_t{v}) {}                   // NOLINT
  Value(int64_t v) : v_(v) {}                        // NOLINT
  Value(size_t v) : v_(static_cast<int64_t>(v)) {}   // NOLINT
  Value(double v) : v_(v) {}                         // NOLINT
  Value(std::string s) : v_(std::move(s)) {}         // NOLINT
  Value(std::string_view s) : v_(std::string(s)) {}  // NOLINT
  Value(const char* s) : v_(std::string(s)) {}       // NOLINT
  Value(ListPtr l) : v_(std::move(l)) {}             // NOLINT
  Value(DictPtr d) : v_(std::move(d)) {}             // NOLINT
  Value(CallablePtr c) : v_(std::move(c)) {}         // NOLINT

  static Value MakeUndefined(std::string hint) {
    Value v;
    v.v_ = Undefined{std::move(hint)};
    return v;
  }
  static Value MakeList(List items = {});
  static Value MakeDict();
  static Value MakeNamespace();

  Kind kind() const { return static_cast<Kind>(v_.index()); }
  bool is_undefined() const { return kind() == Kind::kUndefined; }
  bool is_none() const { return kind() == Kind::kNone; }
  bool is_bool() const { return kind() == Kind::kBool; }
  bool is_int() const { return kind() == Kind::kInt; }
  bool is_float() const { return kind() == Kind::kFloat; }
  bool is_number() const { return is_int() || is_float(); }
  bool is_string() const { return kind() == Kind::kString; }
  bool is_list() const { return kind() == Kind::kList; }
  bool is_dict() const { return kind() == Kind::kDict; }
  bool is_callable() const { return kind() == Kind::kCallable; }

  bool as_bool() const { return std::get<bool>(v_); }
  int64_t as_int() const { return std::get<int64_t>(v_); }
  double as_float() const { return std::get<double>(v_); }
  double as_number() const { return is_int() ? static_cast<double>(as_int()) : as_float(); }
  const std::string& as_string() const { return std::get<std::string>(v_); }
  const ListPtr& as_list() const { return std::get<ListPtr>(v_); }
  const DictPtr& as_dict() const { return std::get<DictPtr>(v_); }
  const CallablePtr& as_callable() const { return std::get<CallablePtr>(v_); }
  const std::string& undefined_hint() const { return std::get<Undefined>(v_).hint; }

  // Python truthiness.
  bool Truthy() const;
  // Python str(): what `{{ v }}` prints (undefined prints nothing, none prints "None").
  std::string ToString() const;
  void AppendTo(std::string* out) const;
  // Python repr() (strings quoted), used inside containers.
  std::string Repr() const;
  // Python ==.
  bool Equals(const Value& other) const;
  const char* TypeName() const;

 private:
  std::variant<Undefined, NoneT, bool, int64_t, double, std::string, ListPtr, DictPtr, CallablePtr> v_;
};

// Insertion-ordered string-keyed mapping.
struct Dict {
  std::vector<std::pair<std::string, Value>> items;
  bool is_namespace = false;

  const Value* Find(std::string_view key) const;
  Value* Find(std::string_view key);
  void Set(std::string_view key, Value v);
  bool Erase(std::string_view key);
};

// Arguments of a call: positional, then keyword.
struct CallArgs {
  std::vector<Value> args;
  std::vector<std::pair<std::string, Value>> kwargs;

  // Positional i, else keyword `name`, else undefined.
  const Value& Get(size_t i, std::string_view name) const;
  bool Has(size_t i, std::string_view name) const { return !Get(i, name).is_undefined(); }
};

struct Callable {
  std::string name;
  std::function<Value(Interpreter&, CallArgs&)> fn;
};

// JSON <-> Value. Objects keep their key order.
Value FromJson(const nlohmann::ordered_json& j);
nlohmann::ordered_json ToJson(const Value& v);

// Python json.dumps(v, ensure_ascii=False, indent=indent, sort_keys=sort_keys): ", " / ": " separators
// without indent, "," / ": " with one (indent < 0 means none).
std::string ToJsonText(const Value& v, int indent = -1, bool sort_keys = false);
// Python repr() of a float: shortest round trip, "1.0", "1e+16", "inf", "nan".
std::string FormatFloat(double d);

}  // namespace rw::chat::jinja
