#include "chat/jinja_interp.h"

#include <cmath>

#include "chat/jinja_strings.h"

namespace rw::chat::jinja {

Value* Scope::Find(std::string_view name) {
  for (Scope* s = this; s; s = s->parent.get()) {
    for (auto& kv : s->vars) {
      if (kv.first == name) return &kv.second;
    }
  }
  return nullptr;
}

void Scope::Set(std::string_view name, Value v) {
  for (auto& kv : vars) {
    if (kv.first == name) {
      kv.second = std::move(v);
      return;
    }
  }
  vars.emplace_back(std::string(name), std::move(v));
}

void Interpreter::Fail(std::string message) const { throw JinjaError{std::move(message), line_, false}; }

void Interpreter::Run(const Body& body, const ScopePtr& globals) { Exec(body, globals); }

Interpreter::Flow Interpreter::Exec(const Body& body, const ScopePtr& scope) {
  for (const auto& s : body) {
    Flow f = ExecStmt(*s, scope);
    if (f != Flow::kNormal) return f;
  }
  return Flow::kNormal;
}

std::string Interpreter::Capture(const Body& body, const ScopePtr& scope) {
  std::string buf;
  std::string* saved = out_;
  out_ = &buf;
  Exec(body, scope);
  out_ = saved;
  return buf;
}

Interpreter::Flow Interpreter::ExecStmt(const Stmt& s, const ScopePtr& scope) {
  line_ = s.line;
  switch (s.kind) {
    case StmtKind::kText:
      *out_ += s.text;
      return Flow::kNormal;
    case StmtKind::kOutput:
      Eval(*s.expr, scope).AppendTo(out_);
      return Flow::kNormal;
    case StmtKind::kIf:
      for (const auto& [cond, body] : s.branches) {
        if (!cond || Eval(*cond, scope).Truthy()) return Exec(body, scope);
        line_ = s.line;
      }
      return Flow::kNormal;
    case StmtKind::kFor:
      ExecFor(s, scope);
      return Flow::kNormal;
    case StmtKind::kSet:
      Assign(*s.target, Eval(*s.expr, scope), scope);
      return Flow::kNormal;
    case StmtKind::kSetBlock: {
      Value v(Capture(s.body, scope));
      if (s.expr) {
        auto inner = std::make_shared<Scope>();
        inner->parent = scope;
        inner->vars.emplace_back("\x01body", std::move(v));
        v = Eval(*s.expr, inner);
      }
      Assign(*s.target, std::move(v), scope);
      return Flow::kNormal;
    }
    case StmtKind::kMacro:
      scope->Set(s.name, MakeMacro(s, scope));
      return Flow::kNormal;
    case StmtKind::kCallBlock: {
      const Stmt* sp = &s;
      auto caller = std::make_shared<Callable>();
      caller->name = "caller";
      ScopePtr defining = scope;
      caller->fn = [sp, defining](Interpreter& in, CallArgs& args) {
        return in.CallMacro(*sp, defining, args, Value());
      };
      const Expr& call = *s.expr;
      Value callee = Eval(*call.children[0], scope);
      CallArgs args;
      EvalArgs(call, 1, scope, &args);
      args.kwargs.emplace_back("caller", Value(std::move(caller)));
      line_ = s.line;
      CallValue(callee, args).AppendTo(out_);
      return Flow::kNormal;
    }
    case StmtKind::kFilterBlock: {
      auto inner = std::make_shared<Scope>();
      inner->parent = scope;
      inner->vars.emplace_back("\x01body", Value(Capture(s.body, scope)));
      Eval(*s.expr, inner).AppendTo(out_);
      return Flow::kNormal;
    }
    case StmtKind::kBreak:
      return Flow::kBreak;
    case StmtKind::kContinue:
      return Flow::kContinue;
    case StmtKind::kDo:
      Eval(*s.expr, scope);
      return Flow::kNormal;
  }
  return Flow::kNormal;
}

void Interpreter::Assign(const Expr& target, Value v, const ScopePtr& scope) {
  if (target.kind == ExprKind::kName) {
    scope->Set(target.name, std::move(v));
  } else if (target.kind == ExprKind::kGetAttr) {
    Value obj = Eval(*target.children[0], scope);
    if (!obj.is_dict()) Fail("cannot set attribute '" + target.name + "' on a " + obj.TypeName());
    obj.as_dict()->Set(target.name, std::move(v));
  } else if (target.kind == ExprKind::kTuple) {
    List items = Iterate(*this, v);
    if (items.size() != target.children.size()) {
      Fail("cannot unpack " + std::to_string(items.size()) + " values into " +
           std::to_string(target.children.size()) + " names");
    }
    for (size_t i = 0; i < items.size(); ++i) Assign(*target.children[i], std::move(items[i]), scope);
  } else {
    Fail("cannot assign to this expression");
  }
}

void Interpreter::ExecFor(const Stmt& s, const ScopePtr& scope) {
  List items = Iterate(*this, Eval(*s.expr, scope));
  auto loop_scope = std::make_shared<Scope>();
  loop_scope->parent = scope;
  if (s.condition) {
    List kept;
    for (auto& it : items) {
      Assign(*s.target, it, loop_scope);
      if (Eval(*s.condition, loop_scope).Truthy()) kept.push_back(std::move(it));
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    Exec(s.else_body, scope);
    return;
  }
  const bool observed = observer_ && out_ == root_out_;
  if (observed) observer_->OnLoopBegin(out_->size());
  enum { kIndex0, kIndex, kRevindex, kRevindex0, kFirst, kLast, kLength, kPrev, kNext, kDepth, kDepth0 };
  auto loop = std::make_shared<Dict>();
  for (const char* k : {"index0", "index", "revindex", "revindex0", "first", "last", "length", "previtem",
                        "nextitem", "depth", "depth0"}) {
    loop->items.emplace_back(k, Value());
  }
  auto cycle = std::make_shared<Callable>();
  cycle->name = "cycle";
  auto counter = std::make_shared<int64_t>(0);
  cycle->fn = [counter](Interpreter& in, CallArgs& args) -> Value {
    if (args.args.empty()) in.Fail("loop.cycle() needs at least one argument");
    return args.args[static_cast<size_t>(*counter) % args.args.size()];
  };
  loop->items.emplace_back("cycle", Value(cycle));
  ++depth_;
  loop->items[kDepth].second = Value(int64_t{depth_});
  loop->items[kDepth0].second = Value(int64_t{depth_ - 1});
  loop->items[kLength].second = Value(items.size());
  loop_scope->Set("loop", Value(loop));
  const size_t n = items.size();
  for (size_t i = 0; i < n; ++i) {
    *counter = static_cast<int64_t>(i);
    auto& li = loop->items;
    li[kIndex0].second = Value(i);
    li[kIndex].second = Value(i + 1);
    li[kRevindex].second = Value(n - i);
    li[kRevindex0].second = Value(n - i - 1);
    li[kFirst].second = Value(i == 0);
    li[kLast].second = Value(i + 1 == n);
    li[kPrev].second = i > 0 ? items[i - 1] : Value::MakeUndefined("loop.previtem");
    li[kNext].second = i + 1 < n ? items[i + 1] : Value::MakeUndefined("loop.nextitem");
    if (observed) observer_->OnIteration(items[i], out_->size());
    Assign(*s.target, items[i], loop_scope);
    Flow f = Exec(s.body, loop_scope);
    if (f == Flow::kBreak) break;
  }
  --depth_;
  if (observed) observer_->OnLoopEnd(out_->size());
}

Value Interpreter::MakeMacro(const Stmt& s, const ScopePtr& scope) {
  auto c = std::make_shared<Callable>();
  c->name = s.name;
  const Stmt* sp = &s;
  std::weak_ptr<Scope> weak = scope;  // the defining scope holds the macro: avoid a reference cycle
  c->fn = [sp, weak](Interpreter& in, CallArgs& args) -> Value {
    ScopePtr defining = weak.lock();
    if (!defining) in.Fail("macro '" + sp->name + "' called after its scope ended");
    Value caller;
    for (auto it = args.kwargs.begin(); it != args.kwargs.end(); ++it) {
      if (it->first == "caller") {
        caller = it->second;
        args.kwargs.erase(it);
        break;
      }
    }
    return in.CallMacro(*sp, defining, args, caller);
  };
  return Value(std::move(c));
}

Value Interpreter::CallMacro(const Stmt& s, const ScopePtr& defining, CallArgs& args, const Value& caller) {
  if (depth_ > 200) Fail("macro recursion too deep");
  auto local = std::make_shared<Scope>();
  local->parent = defining;
  List varargs;
  for (size_t i = 0; i < args.args.size(); ++i) {
    if (i < s.params.size()) {
      local->Set(s.params[i], args.args[i]);
    } else {
      varargs.push_back(args.args[i]);
    }
  }
  auto kwargs = std::make_shared<Dict>();
  for (auto& [k, v] : args.kwargs) {
    bool is_param = false;
    for (const auto& p : s.params) is_param |= p == k;
    if (is_param) {
      local->Set(k, v);
    } else {
      kwargs->Set(k, v);
    }
  }
  for (size_t i = 0; i < s.params.size(); ++i) {
    bool bound = false;
    for (const auto& kv : local->vars) bound |= kv.first == s.params[i];
    if (bound) continue;
    local->Set(s.params[i], s.defaults[i] ? Eval(*s.defaults[i], local) : Value::MakeUndefined(s.params[i]));
  }
  local->Set("varargs", Value::MakeList(std::move(varargs)));
  local->Set("kwargs", Value(kwargs));
  if (!caller.is_undefined()) local->Set("caller", caller);
  int saved_line = line_;
  ++depth_;
  std::string text = Capture(s.body, local);
  --depth_;
  line_ = saved_line;
  return Value(std::move(text));
}

Value Interpreter::Lookup(const std::string& name, const ScopePtr& scope) {
  if (Value* v = scope->Find(name)) return *v;
  Value g = LookupGlobal(name);
  if (!g.is_undefined()) return g;
  return Value::MakeUndefined(name);
}

void Interpreter::EvalArgs(const Expr& e, size_t first, const ScopePtr& scope, CallArgs* args) {
  for (size_t i = first; i < e.children.size(); ++i) args->args.push_back(Eval(*e.children[i], scope));
  for (const auto& [k, x] : e.kwargs) args->kwargs.emplace_back(k, Eval(*x, scope));
}

Value Interpreter::CallValue(const Value& callee, CallArgs& args) {
  if (callee.is_callable()) return callee.as_callable()->fn(*this, args);
  if (callee.is_undefined()) Fail("'" + callee.undefined_hint() + "' is undefined");
  Fail(std::string("a ") + callee.TypeName() + " value is not callable");
}

Value Interpreter::EvalCall(const Expr& e, const ScopePtr& scope) {
  const Expr& fn = *e.children[0];
  CallArgs args;
  if (fn.kind == ExprKind::kGetAttr) {
    Value obj = Eval(*fn.children[0], scope);
    EvalArgs(e, 1, scope, &args);
    line_ = e.line;
    Value result;
    if (CallMethod(*this, obj, fn.name, args, &result)) return result;
    if (obj.is_undefined()) {
      Fail("cannot call '" + fn.name + "()' on an undefined value" +
           (obj.undefined_hint().empty() ? "" : " ('" + obj.undefined_hint() + "')"));
    }
    Value callee = GetAttr(obj, fn.name);
    if (callee.is_undefined()) Fail(std::string("a ") + obj.TypeName() + " has no method '" + fn.name + "'");
    return CallValue(callee, args);
  }
  Value callee = Eval(fn, scope);
  EvalArgs(e, 1, scope, &args);
  line_ = e.line;
  return CallValue(callee, args);
}

namespace {

[[noreturn]] void TypeFail(const Interpreter& in, const std::string& op, const Value& a, const Value& b) {
  if (a.is_undefined()) in.Fail("'" + a.undefined_hint() + "' is undefined");
  if (b.is_undefined()) in.Fail("'" + b.undefined_hint() + "' is undefined");
  in.Fail("unsupported operand types for " + op + ": " + a.TypeName() + " and " + b.TypeName());
}

double FloorDiv(double a, double b) { return std::floor(a / b); }

}  // namespace

Value Interpreter::EvalBinary(const Expr& e, const ScopePtr& scope) {
  const std::string& op = e.name;
  if (op == "and") {
    Value a = Eval(*e.children[0], scope);
    return a.Truthy() ? Eval(*e.children[1], scope) : a;
  }
  if (op == "or") {
    Value a = Eval(*e.children[0], scope);
    return a.Truthy() ? a : Eval(*e.children[1], scope);
  }
  Value a = Eval(*e.children[0], scope);
  Value b = Eval(*e.children[1], scope);
  line_ = e.line;
  if (op == "~") {
    std::string s = a.ToString();
    b.AppendTo(&s);
    return Value(std::move(s));
  }
  auto num = [](const Value& v) { return v.is_number() || v.is_bool(); };
  auto as_i = [](const Value& v) { return v.is_bool() ? int64_t{v.as_bool()} : v.as_int(); };
  auto as_d = [](const Value& v) { return v.is_bool() ? double{v.as_bool() ? 1.0 : 0.0} : v.as_number(); };
  bool ints = (a.is_int() || a.is_bool()) && (b.is_int() || b.is_bool());
  if (op == "+") {
    if (a.is_string() && b.is_string()) return Value(a.as_string() + b.as_string());
    if (a.is_list() && b.is_list()) {
      List l = *a.as_list();
      l.insert(l.end(), b.as_list()->begin(), b.as_list()->end());
      return Value::MakeList(std::move(l));
    }
    if (num(a) && num(b)) return ints ? Value(as_i(a) + as_i(b)) : Value(as_d(a) + as_d(b));
    TypeFail(*this, op, a, b);
  }
  if (op == "*") {
    if (a.is_string() && b.is_int()) {
      std::string s;
      for (int64_t i = 0; i < b.as_int(); ++i) s += a.as_string();
      return Value(std::move(s));
    }
    if (a.is_list() && b.is_int()) {
      List l;
      for (int64_t i = 0; i < b.as_int(); ++i) l.insert(l.end(), a.as_list()->begin(), a.as_list()->end());
      return Value::MakeList(std::move(l));
    }
    if (num(a) && num(b)) return ints ? Value(as_i(a) * as_i(b)) : Value(as_d(a) * as_d(b));
    TypeFail(*this, op, a, b);
  }
  if (!num(a) || !num(b)) {
    if (op == "%" && a.is_string()) Fail("printf-style '%' formatting is not supported");
    TypeFail(*this, op, a, b);
  }
  if (op == "-") return ints ? Value(as_i(a) - as_i(b)) : Value(as_d(a) - as_d(b));
  if (op == "/") {
    if (as_d(b) == 0) Fail("division by zero");
    return Value(as_d(a) / as_d(b));
  }
  if (op == "//") {
    if (as_d(b) == 0) Fail("division by zero");
    if (ints) {
      int64_t x = as_i(a), y = as_i(b), q = x / y;
      if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
      return Value(q);
    }
    return Value(FloorDiv(as_d(a), as_d(b)));
  }
  if (op == "%") {
    if (as_d(b) == 0) Fail("modulo by zero");
    if (ints) {
      int64_t x = as_i(a), y = as_i(b), r = x % y;
      if (r != 0 && ((r < 0) != (y < 0))) r += y;
      return Value(r);
    }
    double x = as_d(a), y = as_d(b);
    return Value(x - y * std::floor(x / y));
  }
  if (op == "**") {
    if (ints && as_i(b) >= 0) {
      int64_t r = 1, base = as_i(a);
      for (int64_t i = 0; i < as_i(b); ++i) r *= base;
      return Value(r);
    }
    return Value(std::pow(as_d(a), as_d(b)));
  }
  Fail("unknown operator " + op);
}

Value Interpreter::EvalCompare(const Expr& e, const ScopePtr& scope) {
  Value left = Eval(*e.children[0], scope);
  for (size_t i = 0; i < e.ops.size(); ++i) {
    Value right = Eval(*e.children[i + 1], scope);
    line_ = e.line;
    const std::string& op = e.ops[i];
    bool r;
    if (op == "==")
      r = left.Equals(right);
    else if (op == "!=")
      r = !left.Equals(right);
    else if (op == "<")
      r = Less(*this, left, right);
    else if (op == ">")
      r = Less(*this, right, left);
    else if (op == "<=")
      r = !Less(*this, right, left);
    else if (op == ">=")
      r = !Less(*this, left, right);
    else if (op == "in")
      r = Contains(right, left);
    else
      r = !Contains(right, left);
    if (!r) return Value(false);
    left = std::move(right);
  }
  return Value(true);
}

Value Interpreter::Eval(const Expr& e, const ScopePtr& scope) {
  switch (e.kind) {
    case ExprKind::kLiteral:
      return e.literal;
    case ExprKind::kName:
      return Lookup(e.name, scope);
    case ExprKind::kList:
    case ExprKind::kTuple: {
      List l;
      l.reserve(e.children.size());
      for (const auto& c : e.children) l.push_back(Eval(*c, scope));
      return Value::MakeList(std::move(l));
    }
    case ExprKind::kDict: {
      auto d = std::make_shared<Dict>();
      for (size_t i = 0; i + 1 < e.children.size(); i += 2) {
        Value k = Eval(*e.children[i], scope);
        d->Set(k.ToString(), Eval(*e.children[i + 1], scope));
      }
      return Value(std::move(d));
    }
    case ExprKind::kGetAttr: {
      Value obj = Eval(*e.children[0], scope);
      // jinja2 raises on an attribute of an index past the end (`messages[0].role` on an empty list).
      if (IsMissingElement(obj)) Fail(obj.undefined_hint());
      return GetAttr(obj, e.name);
    }
    case ExprKind::kGetItem: {
      Value obj = Eval(*e.children[0], scope);
      if (IsMissingElement(obj)) Fail(obj.undefined_hint());
      return GetItem(obj, Eval(*e.children[1], scope));
    }
    case ExprKind::kSlice: {
      Value obj = Eval(*e.children[0], scope);
      Value parts[3];
      for (int k = 0; k < 3; ++k) {
        if (e.children[static_cast<size_t>(k) + 1])
          parts[k] = Eval(*e.children[static_cast<size_t>(k) + 1], scope);
      }
      line_ = e.line;
      for (const auto& p : parts) {
        if (!p.is_undefined() && !p.is_none() && !p.is_int()) Fail("slice indices must be integers");
      }
      if (!obj.is_list() && !obj.is_string()) {
        if (obj.is_undefined()) return obj;
        Fail(std::string("cannot slice a ") + obj.TypeName());
      }
      if (parts[2].is_int() && parts[2].as_int() == 0) Fail("slice step cannot be zero");
      return Slice(obj, parts[0], parts[1], parts[2]);
    }
    case ExprKind::kCall:
      return EvalCall(e, scope);
    case ExprKind::kFilter: {
      Value v = e.children[0] ? Eval(*e.children[0], scope) : Lookup("\x01body", scope);
      CallArgs args;
      EvalArgs(e, 1, scope, &args);
      line_ = e.line;
      return ApplyFilter(*this, e.name, v, args);
    }
    case ExprKind::kTest: {
      Value v = Eval(*e.children[0], scope);
      CallArgs args;
      EvalArgs(e, 1, scope, &args);
      line_ = e.line;
      bool r = ApplyTest(*this, e.name, v, args);
      return Value(e.negated ? !r : r);
    }
    case ExprKind::kUnary: {
      Value v = Eval(*e.children[0], scope);
      line_ = e.line;
      if (e.name == "not") return Value(!v.Truthy());
      if (v.is_bool()) v = Value(int64_t{v.as_bool()});
      if (!v.is_number()) {
        if (v.is_undefined()) Fail("'" + v.undefined_hint() + "' is undefined");
        Fail(std::string("bad operand type for unary ") + e.name + ": " + v.TypeName());
      }
      if (e.name == "+") return v;
      return v.is_int() ? Value(-v.as_int()) : Value(-v.as_float());
    }
    case ExprKind::kBinary:
      return EvalBinary(e, scope);
    case ExprKind::kCompare:
      return EvalCompare(e, scope);
    case ExprKind::kCond: {
      if (Eval(*e.children[0], scope).Truthy()) return Eval(*e.children[1], scope);
      if (e.children[2]) return Eval(*e.children[2], scope);
      return Value::MakeUndefined("");
    }
  }
  return Value();
}

}  // namespace rw::chat::jinja
