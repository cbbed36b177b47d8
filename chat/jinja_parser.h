// Jinja parser: tokens -> statement tree, with Jinja2's operator precedence (filters and tests bind tighter
// than arithmetic: `a + b | trim` is `a + (b | trim)`).
#pragma once

#include <vector>

#include "base/expected.h"
#include "chat/jinja_ast.h"
#include "chat/jinja_lexer.h"

namespace rw::chat::jinja {

// Errors name the line ("template line 7: expected 'endfor'").
Expected<Body> Parse(const std::vector<Token>& tokens);

}  // namespace rw::chat::jinja
