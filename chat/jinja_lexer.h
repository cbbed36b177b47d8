// Jinja lexer: splits a template into text and tag tokens, applying Hugging Face's whitespace settings
// (trim_blocks, lstrip_blocks) and the `-` / `+` modifiers of every tag kind. Comments are dropped here and
// `{% raw %}` blocks become text.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/expected.h"

namespace rw::chat::jinja {

enum class Tok : uint8_t {
  kText,        // literal template text (already whitespace-trimmed)
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kVarBegin,    // {{
  kVarEnd,      // }}
  kName,
  kString,  // text holds the decoded value
  kInt,
  kFloat,
  kOp,  // operators and punctuation, text holds the spelling
  kEof,
};

struct Token {
  Tok type = Tok::kEof;
  std::string text;
  int64_t i = 0;
  double f = 0;
  int line = 1;
};

struct LexOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
};

// Errors name the line ("template line 3: unterminated string").
Expected<std::vector<Token>> Lex(std::string_view source, const LexOptions& options = {});

}  // namespace rw::chat::jinja
