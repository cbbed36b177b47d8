// Jinja interpreter: walks the statement tree, writing output into a string. Errors are thrown internally as
// JinjaError and turned into rw::Error at the library boundary (jinja.cc); nothing escapes the library.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chat/jinja_ast.h"
#include "chat/jinja_value.h"

namespace rw::chat::jinja {

struct JinjaError {
  std::string message;
  int line = 0;
  bool raised = false;  // from raise_exception(): the message is the template's own
};

struct Scope {
  std::vector<std::pair<std::string, Value>> vars;
  std::shared_ptr<Scope> parent;

  Value* Find(std::string_view name);
  void Set(std::string_view name, Value v);
};
using ScopePtr = std::shared_ptr<Scope>;

// Sees every top-level for loop (output going to the prompt itself, not into a macro's result), with the
// output length at each point. Chat rendering uses it to find where each message starts.
class LoopObserver {
 public:
  virtual ~LoopObserver() = default;
  virtual void OnLoopBegin(size_t out_offset) = 0;
  virtual void OnIteration(const Value& item, size_t out_offset) = 0;
  virtual void OnLoopEnd(size_t out_offset) = 0;
};

class Interpreter {
 public:
  Interpreter(std::string* out, LoopObserver* observer) : root_out_(out), out_(out), observer_(observer) {}

  void Run(const Body& body, const ScopePtr& globals);

  Value Eval(const Expr& e, const ScopePtr& scope);
  Value CallValue(const Value& callee, CallArgs& args);
  [[noreturn]] void Fail(std::string message) const;
  int line() const { return line_; }

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  Flow Exec(const Body& body, const ScopePtr& scope);
  Flow ExecStmt(const Stmt& s, const ScopePtr& scope);
  void ExecFor(const Stmt& s, const ScopePtr& scope);
  void Assign(const Expr& target, Value v, const ScopePtr& scope);
  Value MakeMacro(const Stmt& s, const ScopePtr& scope);
  Value CallMacro(const Stmt& s, const ScopePtr& defining, CallArgs& args, const Value& caller);
  std::string Capture(const Body& body, const ScopePtr& scope);

  Value EvalCall(const Expr& e, const ScopePtr& scope);
  void EvalArgs(const Expr& e, size_t first, const ScopePtr& scope, CallArgs* args);
  Value EvalBinary(const Expr& e, const ScopePtr& scope);
  Value EvalCompare(const Expr& e, const ScopePtr& scope);
  Value Lookup(const std::string& name, const ScopePtr& scope);

  std::string* root_out_;
  std::string* out_;
  LoopObserver* observer_;
  int line_ = 0;
  int depth_ = 0;
};

// Operators and item access shared by the interpreter and the builtins.
Value GetAttr(const Value& obj, const std::string& name);
Value GetItem(const Value& obj, const Value& key);
// The undefined an index past a list's or string's end yields ("list object has no element 0"): any attribute
// or item of it is an error, as in jinja2.
bool IsMissingElement(const Value& v);
Value Slice(const Value& obj, const Value& start, const Value& stop, const Value& step);
bool Contains(const Value& container, const Value& item);
// Python <: numbers, strings, lists. Fails (via interp) on mixed types.
bool Less(const Interpreter& interp, const Value& a, const Value& b);
// Items a for loop visits: list items, dict keys, string characters; undefined is empty.
List Iterate(const Interpreter& interp, const Value& v);

// Builtins (jinja_builtins.cc).
Value ApplyFilter(Interpreter& interp, const std::string& name, const Value& v, CallArgs& args);
bool ApplyTest(Interpreter& interp, const std::string& name, const Value& v, CallArgs& args);
// Returns true and sets *result if `obj` has a method `name` (string, list and dict methods).
bool CallMethod(Interpreter& interp, const Value& obj, const std::string& name, CallArgs& args,
                Value* result);
// range, namespace, dict, raise_exception, strftime_now; undefined if `name` is none of them.
Value LookupGlobal(const std::string& name);

}  // namespace rw::chat::jinja
