#include "server/tool_constraint.h"

#include "grammar/tool_grammar.h"

namespace rw::server {

std::optional<ApiError> ForceToolCalls(const ChatRequest& r, const RenderedChat& rendered,
                                       const std::string& default_grammar, engine::SamplingParams* s) {
  if (!s->grammar.empty() && s->grammar != default_grammar)
    return ApiError::BadRequest(
        "'tool_choice' forcing a call cannot be combined with a grammar or JSON schema", "tool_choice");
  grammar::ToolGrammarOptions o;
  // The template's own tool instructions tell the format: Qwen3.5 / Qwen3-Coder describe <function=...> XML,
  // the Hermes-style templates (Qwen3, Qwen3-2507, Qwen3-Next) a JSON object inside <tool_call>.
  o.format = rendered.prompt.find("<function=") != std::string::npos ? grammar::ToolCallFormat::kQwenXml
                                                                     : grammar::ToolCallFormat::kHermesJson;
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
