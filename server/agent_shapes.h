// Request shapes that coding agents send beyond the API references (docs/clients.md): fields a server may ignore
// (logged once per name), Responses tools grouped in a `namespace` (flattened for the model, named back on the
// way out, as Codex dispatches on the pair) and hosted tools (web_search, ...) that run on OpenAI's side and
// that a local model cannot run (not offered, logged, never an error).
#pragma once

#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/request_parse.h"

namespace rw::server {

// Logs "ignoring field 'x' of <api> requests" the first time each top-level field of `body` outside `known` is
// seen by this process (per api), so a client's new field is visible in the log without flooding it.
void LogIgnoredFieldsOnce(const nlohmann::ordered_json& body, const std::set<std::string_view>& known,
                          std::string_view api);

// Logs `what` the first time it is seen by this process.
void LogOnce(const std::string& what);

// The top-level fields of a Messages API request this server reads or knowingly ignores (metadata,
// context_management, output_config, service_tier, container, mcp_servers, inference_geo).
extern const std::set<std::string_view> kAnthropicKnownFields;

// For a content block type of the Messages API that this server cannot render: the precise reason (blocks of
// Anthropic's server tools, which run on Anthropic's side, and MCP connector blocks); empty for the others.
std::string AnthropicUnrenderableBlock(const std::string& type);

// The name the model sees for function `name` of namespace `ns`: "ns__name" ("ns" + "name" when `ns` already
// ends in "__", as Codex's MCP namespaces "mcp__server__" do).
std::string QualifiedToolName(const std::string& ns, const std::string& name);

struct ResponsesTools {
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();  // chat-form function tools
  // Qualified name -> (namespace, name) for the functions of namespace tools.
  std::map<std::string, std::pair<std::string, std::string>> namespaced;
  std::vector<std::string> ignored;  // types of the hosted tools left out, in request order, once each
};

// Responses `tools`: function tools as they are, namespace tools flattened (their functions under
// QualifiedToolName), every other type (web_search, file_search, code_interpreter, image_generation, mcp,
// local_shell, custom, tool_search, ...) left out and named in `ignored`. A function without a name, a namespace
// without a name or a non-array `tools` is a 400.
ParseResult<ResponsesTools> FlattenResponsesTools(const nlohmann::ordered_json& tools);

}  // namespace rw::server
