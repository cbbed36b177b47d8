#include "server/tool_constraint.h"

#include "grammar/tool_grammar.h"

namespace rw::server {

std::optional<ApiError> ForceToolCalls(const ChatRequest& r, const RenderedChat& rendered,
                                       const std::string& default_grammar, engine::SamplingParams* s) {
  if (!s->grammar.empty() && s->grammar != default_grammar)
    return ApiError::BadRequest(
        "'tool_choice' forcing a call cannot be combined with a grammar or JSON schema", "tool_choice");
  grammar::ToolGrammarOptions o;
  o.format = rendered.tool_format;  // read from the template (chat/tool_format.h)
  o.thinking_open = rendered.thinking_open;
  if (r.tool_choice.rfind("function:", 0) == 0) {
    o.function = r.tool_choice.substr(9);
    o.parallel = false;
  }
  auto g = grammar::ToolCallGbnf(r.tools, o);
  if (!g.ok()) return ApiError::BadRequest(g.error().message, "tools");
  s->grammar = *g;
  return std::nullopt;
}

}  // namespace rw::server
