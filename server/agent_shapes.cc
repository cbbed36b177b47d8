#include "server/agent_shapes.h"

#include <mutex>

#include "base/log.h"

namespace rw::server {

using ojson = nlohmann::ordered_json;

void LogOnce(const std::string& what) {
  static std::mutex mu;
  static std::set<std::string> seen;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (!seen.insert(what).second) return;
  }
  LOG_INFO("%s", what.c_str());
}

void LogIgnoredFieldsOnce(const ojson& body, const std::set<std::string_view>& known, std::string_view api) {
  if (!body.is_object()) return;
  for (const auto& [key, value] : body.items()) {
    if (known.count(key)) continue;
    LogOnce("ignoring field '" + key + "' of " + std::string(api) + " requests (not used by this server)");
  }
}

const std::set<std::string_view> kAnthropicKnownFields = {
    "model",          "messages",     "system",        "max_tokens",         "stop_sequences",
    "stream",         "temperature",  "top_p",         "top_k",              "tools",
    "tool_choice",    "thinking",     "metadata",      "context_management", "output_config",
    "service_tier",   "container",    "mcp_servers",   "inference_geo",      "chat_template_kwargs"};

std::string AnthropicUnrenderableBlock(const std::string& type) {
  if (type == "server_tool_use" || type == "web_search_tool_result" || type == "web_fetch_tool_result" ||
      type == "code_execution_tool_result" || type == "bash_code_execution_tool_result" ||
      type == "text_editor_code_execution_tool_result" || type == "tool_search_tool_result" ||
      type == "container_upload") {
    return "'" + type + "' blocks belong to Anthropic's server tools, which this server does not run";
  }
  if (type == "mcp_tool_use" || type == "mcp_tool_result")
    return "'" + type + "' blocks belong to the MCP connector (mcp_servers), which this server does not run";
  return "";
}

std::string QualifiedToolName(const std::string& ns, const std::string& name) {
  if (ns.size() >= 2 && ns.compare(ns.size() - 2, 2, "__") == 0) return ns + name;
  return ns + "__" + name;
}

namespace {

ParseResult<ojson> FunctionTool(const ojson& t, const std::string& name, const std::string& where) {
  if (name.empty()) return ApiError::BadRequest("'" + where + ".name' is required", where);
  ojson fn = {{"name", name}};
  if (t.contains("description") && t["description"].is_string()) fn["description"] = t["description"];
  if (t.contains("parameters") && t["parameters"].is_object()) fn["parameters"] = t["parameters"];
  return ojson{{"type", "function"}, {"function", std::move(fn)}};
}

}  // namespace

ParseResult<ResponsesTools> FlattenResponsesTools(const ojson& tools) {
  ResponsesTools out;
  if (tools.is_null()) return out;
  if (!tools.is_array()) return ApiError::BadRequest("'tools' must be an array", "tools");
  std::set<std::string> ignored;
  for (size_t i = 0; i < tools.size(); ++i) {
    const ojson& t = tools[i];
    const std::string where = "tools[" + std::to_string(i) + "]";
    if (!t.is_object()) return ApiError::BadRequest("'" + where + "' must be an object", where);
    const std::string type = StringField(t, "type", "");
    if (type == "function") {
      auto fn = FunctionTool(t, StringField(t, "name", ""), where);
      if (auto* e = std::get_if<ApiError>(&fn)) return *e;
      out.tools.push_back(std::move(std::get<ojson>(fn)));
    } else if (type == "namespace") {
      const std::string ns = StringField(t, "name", "");
      if (ns.empty()) return ApiError::BadRequest("'" + where + ".name' is required (a namespace tool)", where);
      if (!t.contains("tools") || !t["tools"].is_array())
        return ApiError::BadRequest("'" + where + ".tools' must be an array (a namespace tool)", where);
      for (size_t j = 0; j < t["tools"].size(); ++j) {
        const ojson& f = t["tools"][j];
        const std::string fw = where + ".tools[" + std::to_string(j) + "]";
        if (!f.is_object() || StringField(f, "type", "function") != "function") {
          const std::string ft = f.is_object() ? StringField(f, "type", "") : "";
          if (ignored.insert(ft).second) out.ignored.push_back(ft);
          continue;
        }
        const std::string name = StringField(f, "name", "");
        auto fn = FunctionTool(f, name.empty() ? "" : QualifiedToolName(ns, name), fw);
        if (auto* e = std::get_if<ApiError>(&fn)) return *e;
        out.namespaced[QualifiedToolName(ns, name)] = {ns, name};
        out.tools.push_back(std::move(std::get<ojson>(fn)));
      }
    } else if (ignored.insert(type).second) {
      out.ignored.push_back(type);
    }
  }
  return out;
}

}  // namespace rw::server
