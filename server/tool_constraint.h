// Forced tool calls (tool_choice "required" or a named function): a grammar built from the tools' schemas in
// the format the model's template asks for, so the output parser always finds a call.
#pragma once

#include <optional>
#include <string>

#include "engine/engine.h"
#include "server/api_error.h"
#include "server/backend.h"
#include "server/request_parse.h"

namespace rw::server {

// Sets s->grammar for the request. `default_grammar`: the server's --grammar, which a forced call replaces;
// a grammar or schema of the request's own cannot be combined with a forced call (400).
std::optional<ApiError> ForceToolCalls(const ChatRequest& r, const RenderedChat& rendered,
                                       const std::string& default_grammar, engine::SamplingParams* s);

}  // namespace rw::server
