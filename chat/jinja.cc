#include "chat/jinja.h"

#include "chat/jinja_lexer.h"
#include "chat/jinja_parser.h"

namespace rw::chat {

Expected<Template> Template::Parse(const std::string& source, const TemplateOptions& options) {
  jinja::LexOptions lex;
  lex.trim_blocks = options.trim_blocks;
  lex.lstrip_blocks = options.lstrip_blocks;
  REWIND_ASSIGN_OR_RETURN(auto tokens, jinja::Lex(source, lex));
  REWIND_ASSIGN_OR_RETURN(auto body, jinja::Parse(tokens));
  Template t;
  t.body_ = std::make_shared<const jinja::Body>(std::move(body));
  t.source_ = std::make_shared<const std::string>(source);
  return t;
}

Expected<std::string> Template::Render(const nlohmann::ordered_json& context) const {
  if (!context.is_object()) return Error::InvalidArgument("template context must be a JSON object");
  return Render(jinja::FromJson(context), nullptr);
}

Expected<std::string> Template::Render(const jinja::Value& context, jinja::LoopObserver* observer) const {
  if (!context.is_dict()) return Error::InvalidArgument("template context must be a mapping");
  auto globals = std::make_shared<jinja::Scope>();
  for (const auto& [k, v] : context.as_dict()->items) globals->vars.emplace_back(k, v);
  std::string out;
  try {
    jinja::Interpreter interp(&out, observer);
    interp.Run(*body_, globals);
  } catch (const jinja::JinjaError& e) {
    if (e.raised) return Error::InvalidArgument(e.message);
    return Error::InvalidArgument("template line " + std::to_string(e.line) + ": " + e.message);
  } catch (const std::exception& e) {
    return Error::Internal(std::string("template rendering failed: ") + e.what());
  }
  // Break reference cycles between scopes and the macros they hold.
  globals->vars.clear();
  return out;
}

}  // namespace rw::chat
