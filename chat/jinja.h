// A parsed Jinja chat template (Hugging Face conventions: trim_blocks and lstrip_blocks on, tojson without
// ASCII escaping, raise_exception, strftime_now). Parse once, render many times; rendering is thread-safe.
// Syntax and semantics covered: docs/chat-templates.md.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "base/expected.h"
#include "chat/jinja_ast.h"
#include "chat/jinja_interp.h"

namespace rw::chat {

struct TemplateOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
};

class Template {
 public:
  // Syntax errors name the template line.
  static Expected<Template> Parse(const std::string& source, const TemplateOptions& options = {});

  // `context` is a JSON object whose members become template variables (key order is kept).
  // Errors: raise_exception(msg) gives exactly msg; other errors read "template line N: ...".
  Expected<std::string> Render(const nlohmann::ordered_json& context) const;
  // Same with variables already converted; `observer` (may be null) sees the top-level loops.
  Expected<std::string> Render(const jinja::Value& context, jinja::LoopObserver* observer) const;

  const std::string& source() const { return *source_; }

 private:
  std::shared_ptr<const jinja::Body> body_;
  std::shared_ptr<const std::string> source_;
};

}  // namespace rw::chat
