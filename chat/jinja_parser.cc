#include "chat/jinja_parser.h"

#include <initializer_list>
#include <stdexcept>
#include <string>

namespace rw::chat::jinja {
namespace {

struct ParseError {
  int line;
  std::string what;
};

class Parser {
 public:
  // Bounds recursion so that hostile nesting is an error, not a stack overflow.
  struct DepthGuard {
    explicit DepthGuard(Parser* p) : p_(p) {
      if (++p_->depth_ > 250) p_->Fail("template nested too deeply");
    }
    ~DepthGuard() { --p_->depth_; }
    Parser* p_;
  };

  explicit Parser(const std::vector<Token>& tokens) : t_(tokens) {}

  Body ParseTemplate() {
    std::string end;
    Body body = ParseBody({}, &end);
    if (Cur().type != Tok::kEof) Fail("unexpected tag");
    return body;
  }

 private:
  const Token& Cur() const { return t_[pos_]; }
  const Token& Peek(size_t k = 1) const { return t_[std::min(pos_ + k, t_.size() - 1)]; }
  void Next() {
    if (pos_ + 1 < t_.size()) ++pos_;
  }
  [[noreturn]] void Fail(const std::string& what) const { throw ParseError{Cur().line, what}; }
  bool IsOp(const char* op) const { return Cur().type == Tok::kOp && Cur().text == op; }
  bool IsName(const char* n) const { return Cur().type == Tok::kName && Cur().text == n; }
  void ExpectOp(const char* op) {
    if (!IsOp(op)) Fail(std::string("expected '") + op + "'" + Found());
    Next();
  }
  std::string Found() const {
    switch (Cur().type) {
      case Tok::kName:
      case Tok::kOp:
        return ", found '" + Cur().text + "'";
      case Tok::kBlockEnd:
        return ", found end of tag";
      case Tok::kVarEnd:
        return ", found '}}'";
      case Tok::kEof:
        return ", found end of template";
      default:
        return "";
    }
  }
  std::string ExpectName() {
    if (Cur().type != Tok::kName) Fail("expected a name" + Found());
    std::string n = Cur().text;
    Next();
    return n;
  }
  void ExpectBlockEnd() {
    if (Cur().type != Tok::kBlockEnd) Fail("expected end of tag" + Found());
    Next();
  }

  // Parses statements until a block tag named in `ends` (left unconsumed after its name) or EOF.
  Body ParseBody(std::initializer_list<const char*> ends, std::string* end_found) {
    Body body;
    while (true) {
      const Token& tok = Cur();
      if (tok.type == Tok::kEof) {
        if (ends.size() != 0) Fail(std::string("missing '{% ") + *ends.begin() + " %}'");
        return body;
      }
      if (tok.type == Tok::kText) {
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::kText;
        s->line = tok.line;
        s->text = tok.text;
        body.push_back(std::move(s));
        Next();
        continue;
      }
      if (tok.type == Tok::kVarBegin) {
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::kOutput;
        s->line = tok.line;
        Next();
        s->expr = ParseTupleExpr(true);
        if (Cur().type != Tok::kVarEnd) Fail("expected '}}'" + Found());
        Next();
        body.push_back(std::move(s));
        continue;
      }
      if (tok.type != Tok::kBlockBegin) Fail("unexpected token");
      const Token& kw = Peek();
      if (kw.type != Tok::kName) {
        Next();
        Fail("expected a statement name" + Found());
      }
      for (const char* e : ends) {
        if (kw.text == e) {
          *end_found = kw.text;
          Next();
          Next();
          return body;
        }
      }
      Next();
      ParseStatement(&body);
    }
  }

  void ParseStatement(Body* body) {
    DepthGuard guard(this);
    int line = Cur().line;
    std::string kw = ExpectName();
    auto s = std::make_unique<Stmt>();
    s->line = line;
    std::string end;
    if (kw == "if") {
      s->kind = StmtKind::kIf;
      ExprPtr cond = ParseTupleExpr(true);
      while (true) {
        ExpectBlockEnd();
        Body b = ParseBody({"elif", "else", "endif"}, &end);
        s->branches.emplace_back(std::move(cond), std::move(b));
        if (end == "elif") {
          cond = ParseTupleExpr(true);
          continue;
        }
        if (end == "else") {
          ExpectBlockEnd();
          Body eb = ParseBody({"endif"}, &end);
          s->branches.emplace_back(nullptr, std::move(eb));
        }
        break;
      }
      ExpectBlockEnd();
    } else if (kw == "for") {
      s->kind = StmtKind::kFor;
      s->target = ParseAssignTarget();
      if (!IsName("in")) Fail("expected 'in'" + Found());
      Next();
      s->expr = ParseTupleExpr(false);
      if (IsName("if")) {
        Next();
        s->condition = ParseExpr(true);
      }
      if (IsName("recursive")) {
        Next();
        s->recursive = true;
      }
      ExpectBlockEnd();
      s->body = ParseBody({"else", "endfor"}, &end);
      if (end == "else") {
        ExpectBlockEnd();
        s->else_body = ParseBody({"endfor"}, &end);
      }
      ExpectBlockEnd();
    } else if (kw == "set") {
      s->target = ParseAssignTarget();
      if (IsOp("=")) {
        Next();
        s->kind = StmtKind::kSet;
        s->expr = ParseTupleExpr(true);
        ExpectBlockEnd();
      } else {
        s->kind = StmtKind::kSetBlock;
        if (IsOp("|")) s->expr = ParseFilterChain(nullptr);
        ExpectBlockEnd();
        s->body = ParseBody({"endset"}, &end);
        ExpectBlockEnd();
      }
    } else if (kw == "macro") {
      s->kind = StmtKind::kMacro;
      s->name = ExpectName();
      ParseParams(s.get());
      ExpectBlockEnd();
      s->body = ParseBody({"endmacro"}, &end);
      if (Cur().type == Tok::kName) Next();  // {% endmacro name %}
      ExpectBlockEnd();
    } else if (kw == "call") {
      s->kind = StmtKind::kCallBlock;
      if (IsOp("(")) ParseParams(s.get());
      s->expr = ParseExpr(true);
      if (s->expr->kind != ExprKind::kCall) Fail("expected a call after 'call'");
      ExpectBlockEnd();
      s->body = ParseBody({"endcall"}, &end);
      ExpectBlockEnd();
    } else if (kw == "filter") {
      s->kind = StmtKind::kFilterBlock;
      s->expr = ParseFilterChain(nullptr, /*leading_bar=*/false);
      ExpectBlockEnd();
      s->body = ParseBody({"endfilter"}, &end);
      ExpectBlockEnd();
    } else if (kw == "break" || kw == "continue") {
      s->kind = kw == "break" ? StmtKind::kBreak : StmtKind::kContinue;
      ExpectBlockEnd();
    } else if (kw == "do") {
      s->kind = StmtKind::kDo;
      s->expr = ParseTupleExpr(true);
      ExpectBlockEnd();
    } else if (kw == "generation") {
      // Hugging Face's assistant-mask marker: renders its body unchanged.
      ExpectBlockEnd();
      Body b = ParseBody({"endgeneration"}, &end);
      ExpectBlockEnd();
      for (auto& x : b) body->push_back(std::move(x));
      return;
    } else {
      pos_--;
      Fail("unknown statement '" + kw + "'");
    }
    body->push_back(std::move(s));
  }

  void ParseParams(Stmt* s) {
    ExpectOp("(");
    while (!IsOp(")")) {
      s->params.push_back(ExpectName());
      if (IsOp("=")) {
        Next();
        s->defaults.push_back(ParseExpr(true));
      } else {
        s->defaults.push_back(nullptr);
      }
      if (!IsOp(",")) break;
      Next();
    }
    ExpectOp(")");
  }

  ExprPtr Make(ExprKind k, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->line = line;
    return e;
  }

  // Assignment / loop target: name, name.attr, or a tuple of names.
  ExprPtr ParseAssignTarget() {
    int line = Cur().line;
    auto one = [&]() -> ExprPtr {
      if (IsOp("(")) {
        Next();
        ExprPtr t = ParseAssignTarget();
        ExpectOp(")");
        return t;
      }
      auto e = Make(ExprKind::kName, Cur().line);
      e->name = ExpectName();
      if (IsOp(".")) {
        Next();
        auto a = Make(ExprKind::kGetAttr, line);
        a->name = ExpectName();
        a->children.push_back(std::move(e));
        return a;
      }
      return e;
    };
    ExprPtr first = one();
    if (!IsOp(",")) return first;
    auto t = Make(ExprKind::kTuple, line);
    t->children.push_back(std::move(first));
    while (IsOp(",")) {
      Next();
      if (IsName("in") || IsOp("=")) break;
      t->children.push_back(one());
    }
    return t;
  }

  // expr or `a, b, c` (a tuple).
  ExprPtr ParseTupleExpr(bool with_cond) {
    int line = Cur().line;
    ExprPtr first = ParseExpr(with_cond);
    if (!IsOp(",")) return first;
    auto t = Make(ExprKind::kTuple, line);
    t->children.push_back(std::move(first));
    while (IsOp(",")) {
      Next();
      if (Cur().type == Tok::kBlockEnd || Cur().type == Tok::kVarEnd || IsOp(")")) break;
      t->children.push_back(ParseExpr(with_cond));
    }
    return t;
  }

  ExprPtr ParseExpr(bool with_cond) {
    DepthGuard guard(this);
    int line = Cur().line;
    ExprPtr e = ParseOr();
    if (!with_cond) return e;
    while (IsName("if")) {
      Next();
      auto c = Make(ExprKind::kCond, line);
      c->children.push_back(ParseOr());
      c->children.push_back(std::move(e));
      if (IsName("else")) {
        Next();
        c->children.push_back(ParseExpr(true));
      } else {
        c->children.push_back(nullptr);
      }
      e = std::move(c);
    }
    return e;
  }

  ExprPtr Binary(const std::string& op, ExprPtr a, ExprPtr b, int line) {
    auto e = Make(ExprKind::kBinary, line);
    e->name = op;
    e->children.push_back(std::move(a));
    e->children.push_back(std::move(b));
    return e;
  }

  ExprPtr ParseOr() {
    ExprPtr e = ParseAnd();
    while (IsName("or")) {
      int line = Cur().line;
      Next();
      e = Binary("or", std::move(e), ParseAnd(), line);
    }
    return e;
  }

  ExprPtr ParseAnd() {
    ExprPtr e = ParseNot();
    while (IsName("and")) {
      int line = Cur().line;
      Next();
      e = Binary("and", std::move(e), ParseNot(), line);
    }
    return e;
  }

  ExprPtr ParseNot() {
    DepthGuard guard(this);
    if (IsName("not")) {
      int line = Cur().line;
      Next();
      auto e = Make(ExprKind::kUnary, line);
      e->name = "not";
      e->children.push_back(ParseNot());
      return e;
    }
    return ParseCompare();
  }

  ExprPtr ParseCompare() {
    int line = Cur().line;
    ExprPtr first = ParseMath1();
    ExprPtr cmp;
    while (true) {
      std::string op;
      if (Cur().type == Tok::kOp &&
          (IsOp("==") || IsOp("!=") || IsOp("<") || IsOp("<=") || IsOp(">") || IsOp(">="))) {
        op = Cur().text;
        Next();
      } else if (IsName("in")) {
        op = "in";
        Next();
      } else if (IsName("not") && Peek().type == Tok::kName && Peek().text == "in") {
        op = "notin";
        Next();
        Next();
      } else {
        break;
      }
      if (!cmp) {
        cmp = Make(ExprKind::kCompare, line);
        cmp->children.push_back(std::move(first));
      }
      cmp->ops.push_back(op);
      cmp->children.push_back(ParseMath1());
    }
    return cmp ? std::move(cmp) : std::move(first);
  }

  ExprPtr ParseMath1() {
    ExprPtr e = ParseConcat();
    while (IsOp("+") || IsOp("-")) {
      std::string op = Cur().text;
      int line = Cur().line;
      Next();
      e = Binary(op, std::move(e), ParseConcat(), line);
    }
    return e;
  }

  ExprPtr ParseConcat() {
    ExprPtr e = ParseMath2();
    while (IsOp("~")) {
      int line = Cur().line;
      Next();
      e = Binary("~", std::move(e), ParseMath2(), line);
    }
    return e;
  }

  ExprPtr ParseMath2() {
    ExprPtr e = ParsePow();
    while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
      std::string op = Cur().text;
      int line = Cur().line;
      Next();
      e = Binary(op, std::move(e), ParsePow(), line);
    }
    return e;
  }

  ExprPtr ParsePow() {
    ExprPtr e = ParseUnary(true);
    while (IsOp("**")) {
      int line = Cur().line;
      Next();
      e = Binary("**", std::move(e), ParseUnary(true), line);
    }
    return e;
  }

  ExprPtr ParseUnary(bool with_filter) {
    DepthGuard guard(this);
    ExprPtr e;
    if (IsOp("-") || IsOp("+")) {
      auto u = Make(ExprKind::kUnary, Cur().line);
      u->name = Cur().text;
      Next();
      u->children.push_back(ParseUnary(false));
      e = std::move(u);
    } else {
      e = ParsePrimary();
    }
    e = ParsePostfix(std::move(e));
    if (with_filter) e = ParseFilterTest(std::move(e));
    return e;
  }

  ExprPtr ParsePrimary() {
    const Token& tok = Cur();
    int line = tok.line;
    switch (tok.type) {
      case Tok::kName: {
        const std::string& n = tok.text;
        auto lit = Make(ExprKind::kLiteral, line);
        if (n == "true" || n == "True")
          lit->literal = Value(true);
        else if (n == "false" || n == "False")
          lit->literal = Value(false);
        else if (n == "none" || n == "None")
          lit->literal = Value(nullptr);
        else {
          auto e = Make(ExprKind::kName, line);
          e->name = n;
          Next();
          return e;
        }
        Next();
        return lit;
      }
      case Tok::kString: {
        std::string s;
        while (Cur().type == Tok::kString) {
          s += Cur().text;
          Next();
        }
        auto lit = Make(ExprKind::kLiteral, line);
        lit->literal = Value(std::move(s));
        return lit;
      }
      case Tok::kInt: {
        auto lit = Make(ExprKind::kLiteral, line);
        lit->literal = Value(tok.i);
        Next();
        return lit;
      }
      case Tok::kFloat: {
        auto lit = Make(ExprKind::kLiteral, line);
        lit->literal = Value(tok.f);
        Next();
        return lit;
      }
      case Tok::kOp: {
        if (IsOp("(")) {
          Next();
          if (IsOp(")")) {
            Next();
            return Make(ExprKind::kTuple, line);
          }
          ExprPtr e = ParseTupleExpr(true);
          ExpectOp(")");
          return e;
        }
        if (IsOp("[")) {
          Next();
          auto l = Make(ExprKind::kList, line);
          while (!IsOp("]")) {
            l->children.push_back(ParseExpr(true));
            if (!IsOp(",")) break;
            Next();
          }
          ExpectOp("]");
          return l;
        }
        if (IsOp("{")) {
          Next();
          auto d = Make(ExprKind::kDict, line);
          while (!IsOp("}")) {
            d->children.push_back(ParseExpr(true));
            ExpectOp(":");
            d->children.push_back(ParseExpr(true));
            if (!IsOp(",")) break;
            Next();
          }
          ExpectOp("}");
          return d;
        }
        break;
      }
      default:
        break;
    }
    Fail("unexpected token in expression" + Found());
  }

  ExprPtr ParsePostfix(ExprPtr e) {
    while (true) {
      int line = Cur().line;
      if (IsOp(".")) {
        Next();
        if (Cur().type == Tok::kInt) {
          auto g = Make(ExprKind::kGetItem, line);
          auto idx = Make(ExprKind::kLiteral, line);
          idx->literal = Value(Cur().i);
          Next();
          g->children.push_back(std::move(e));
          g->children.push_back(std::move(idx));
          e = std::move(g);
          continue;
        }
        auto g = Make(ExprKind::kGetAttr, line);
        g->name = ExpectName();
        g->children.push_back(std::move(e));
        e = std::move(g);
      } else if (IsOp("[")) {
        Next();
        ExprPtr parts[3];
        bool slice = false;
        for (int k = 0; k < 3; ++k) {
          if (!IsOp(":") && !IsOp("]")) parts[k] = ParseExpr(true);
          if (k < 2 && IsOp(":")) {
            slice = true;
            Next();
          } else {
            break;
          }
        }
        ExpectOp("]");
        if (slice) {
          auto s = Make(ExprKind::kSlice, line);
          s->children.push_back(std::move(e));
          for (auto& p : parts) s->children.push_back(std::move(p));
          e = std::move(s);
        } else {
          if (!parts[0]) Fail("empty subscript");
          auto g = Make(ExprKind::kGetItem, line);
          g->children.push_back(std::move(e));
          g->children.push_back(std::move(parts[0]));
          e = std::move(g);
        }
      } else if (IsOp("(")) {
        auto c = Make(ExprKind::kCall, line);
        c->children.push_back(std::move(e));
        ParseCallArgs(c.get());
        e = std::move(c);
      } else {
        return e;
      }
    }
  }

  void ParseCallArgs(Expr* e) {
    ExpectOp("(");
    while (!IsOp(")")) {
      if (Cur().type == Tok::kName && Peek().type == Tok::kOp && Peek().text == "=") {
        std::string n = Cur().text;
        Next();
        Next();
        e->kwargs.emplace_back(n, ParseExpr(true));
      } else {
        if (!e->kwargs.empty()) Fail("positional argument after keyword argument");
        e->children.push_back(ParseExpr(true));
      }
      if (!IsOp(",")) break;
      Next();
    }
    ExpectOp(")");
  }

  // `| f(args) | g` applied to `e` (null: the body of a filter block / block set).
  ExprPtr ParseFilterChain(ExprPtr e, bool leading_bar = true) {
    bool first = true;
    while (IsOp("|") || (first && !leading_bar)) {
      if (IsOp("|")) Next();
      first = false;
      auto f = Make(ExprKind::kFilter, Cur().line);
      f->name = ExpectName();
      f->children.push_back(std::move(e));
      if (IsOp("(")) ParseCallArgs(f.get());
      e = std::move(f);
    }
    return e;
  }

  ExprPtr ParseFilterTest(ExprPtr e) {
    while (true) {
      if (IsOp("|")) {
        e = ParseFilterChain(std::move(e));
        e = ParsePostfix(std::move(e));
      } else if (IsName("is")) {
        auto t = Make(ExprKind::kTest, Cur().line);
        Next();
        if (IsName("not")) {
          t->negated = true;
          Next();
        }
        t->name = ExpectName();
        t->children.push_back(std::move(e));
        if (IsOp("(")) {
          ParseCallArgs(t.get());
        } else if (Cur().type == Tok::kString || Cur().type == Tok::kInt || Cur().type == Tok::kFloat ||
                   IsOp("[") || IsOp("{") ||
                   (Cur().type == Tok::kName && !IsName("else") && !IsName("or") && !IsName("and") &&
                    !IsName("if") && !IsName("in") && !IsName("is") && !IsName("not"))) {
          t->children.push_back(ParsePostfix(ParsePrimary()));
        }
        e = std::move(t);
      } else {
        return e;
      }
    }
  }

  const std::vector<Token>& t_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

Expected<Body> Parse(const std::vector<Token>& tokens) {
  try {
    Parser p(tokens);
    return p.ParseTemplate();
  } catch (const ParseError& e) {
    return Error::InvalidArgument("template line " + std::to_string(e.line) + ": " + e.what);
  }
}

}  // namespace rw::chat::jinja
