// Jinja syntax tree: generic expression and statement nodes (one struct each, a kind tag and the fields the
// kind uses), produced by the parser and walked by the interpreter.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja_value.h"

namespace rw::chat::jinja {

enum class ExprKind : uint8_t {
  kLiteral,  // literal
  kName,     // name
  kList,     // children
  kTuple,    // children
  kDict,     // children: key0, value0, key1, value1, ...
  kGetAttr,  // children[0].name
  kGetItem,  // children[0][children[1]]
  kSlice,    // children[0][c1:c2:c3], missing parts are null
  kCall,     // children[0](children[1..], kwargs)
  kFilter,   // children[0] | name(children[1..], kwargs); children[0] null inside {% filter %}
  kTest,     // children[0] is [not] name(children[1..])
  kUnary,    // op children[0]: "-", "+", "not"
  kBinary,   // children[0] op children[1]: + - * / // % ** ~ and or
  kCompare,  // children[0] ops[0] children[1] ops[1] children[2] ...: == != < <= > >= in notin
  kCond,     // children[1] if children[0] else children[2] (children[2] may be null)
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  ExprKind kind = ExprKind::kLiteral;
  int line = 0;
  Value literal;
  std::string name;      // name, attribute, filter/test name, or operator
  bool negated = false;  // kTest: `is not`
  std::vector<ExprPtr> children;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;  // kCompare
};

enum class StmtKind : uint8_t {
  kText,
  kOutput,       // {{ expr }}
  kIf,           // branches (null condition = else)
  kFor,          // for target in expr [if cond] body [else else_body]
  kSet,          // set target = expr
  kSetBlock,     // set target %} body {% endset  (expr: optional filter applied to the body)
  kMacro,        // macro name(params) body
  kCallBlock,    // call(params) expr body
  kFilterBlock,  // filter expr body
  kBreak,
  kContinue,
  kDo,  // do expr
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  StmtKind kind = StmtKind::kText;
  int line = 0;
  std::string text;  // kText
  ExprPtr expr;
  ExprPtr target;
  ExprPtr condition;                               // kFor: loop filter
  std::vector<std::pair<ExprPtr, Body>> branches;  // kIf
  Body body;
  Body else_body;
  bool recursive = false;
  // kMacro / kCallBlock parameters; defaults[i] null when the parameter has none.
  std::string name;
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;
};

}  // namespace rw::chat::jinja
