// The request shapes coding agents send (Claude Code, Codex, qwen-code; docs/clients.md): converted, ignored or
// refused precisely, with the scripted fake engine over real HTTP where the answer matters.
#include "server/agent_shapes.h"

#include <gtest/gtest.h>

#include "server/anthropic_convert.h"
#include "server/responses_api.h"
#include "server/testing/test_server.h"

namespace rw::server {
namespace {

using nlohmann::json;
using ojson = nlohmann::ordered_json;
using testing::TestServer;

TEST(AgentShapes, NamespaceFunctionsAreQualifiedAndHostedToolsLeftOut) {
  EXPECT_EQ(QualifiedToolName("multi_agent_v1", "close_agent"), "multi_agent_v1__close_agent");
  EXPECT_EQ(QualifiedToolName("mcp__files__", "read"), "mcp__files__read");
  auto r = FlattenResponsesTools(ojson::parse(R"([
    {"type": "function", "name": "exec_command", "parameters": {"type": "object"}},
    {"type": "namespace", "name": "multi_agent_v1", "description": "agents",
     "tools": [{"type": "function", "name": "close_agent", "parameters": {"type": "object"}}]},
    {"type": "web_search", "external_web_access": false},
    {"type": "image_generation"}, {"type": "web_search"}])"));
  ASSERT_TRUE(std::holds_alternative<ResponsesTools>(r)) << std::get<ApiError>(r).message;
  const ResponsesTools& t = std::get<ResponsesTools>(r);
  ASSERT_EQ(t.tools.size(), 2u);
  EXPECT_EQ(t.tools[0]["function"]["name"], "exec_command");
  EXPECT_EQ(t.tools[1]["function"]["name"], "multi_agent_v1__close_agent");
  EXPECT_EQ(t.namespaced.at("multi_agent_v1__close_agent"),
            (std::pair<std::string, std::string>{"multi_agent_v1", "close_agent"}));
  EXPECT_EQ(t.ignored, (std::vector<std::string>{"web_search", "image_generation"}));
  auto bad = FlattenResponsesTools(ojson::parse(R"([{"type": "namespace", "tools": []}])"));
  ASSERT_TRUE(std::holds_alternative<ApiError>(bad));
  EXPECT_EQ(std::get<ApiError>(bad).status, 400);
}

TEST(AgentShapes, CodexLeadingDeveloperMessagesBecomeOneSystemMessageAndNamespacedCallsKeepTheirName) {
  ResponseStore store;
  auto r = ParseResponsesRequest(ojson::parse(R"({
    "model": "m", "store": false, "include": ["reasoning.encrypted_content"], "prompt_cache_key": "s1",
    "client_metadata": {"session_id": "s1"}, "reasoning": {"summary": "auto"}, "parallel_tool_calls": true,
    "a_field_from_next_week": 1,
    "tools": [{"type": "namespace", "name": "weather", "tools": [{"type": "function", "name": "get"}]}],
    "input": [
      {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "You are Codex."}]},
      {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Skills."}]},
      {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
      {"type": "function_call", "name": "get", "namespace": "weather", "arguments": "{}", "call_id": "c1"},
      {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
      {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Mode changed."}]}
    ]})"),
                                 store);
  ASSERT_TRUE(std::holds_alternative<ResponsesRequest>(r)) << std::get<ApiError>(r).message;
  const ojson& m = std::get<ResponsesRequest>(r).chat_body["messages"];
  ASSERT_EQ(m.size(), 5u) << m.dump();
  EXPECT_EQ(m[0], (ojson{{"role", "system"}, {"content", "You are Codex.\n\nSkills."}}));
  EXPECT_EQ(m[1]["role"], "user");
  EXPECT_EQ(m[2]["tool_calls"][0]["function"]["name"], "weather__get");
  EXPECT_EQ(m[3]["role"], "tool");
  EXPECT_EQ(m[4], (ojson{{"role", "system"}, {"content", "Mode changed."}}));  // in place (late system)
}

TEST(AgentShapes, ResponsesAnswerANamespacedCallWithItsNamespaceAndNameHostedToolsInAHeader) {
  TestServer ts;
  json tools = json::parse(R"([{"type": "namespace", "name": "weather", "description": "w",
    "tools": [{"type": "function", "name": "get", "parameters": {"type": "object"}}]},
    {"type": "web_search"}])");
  auto r = ts.Post("/v1/responses", {{"input", "CALL_NAMESPACED"}, {"tools", tools}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->get_header_value("X-Rewind-Ignored-Tools"), "web_search");
  json first = json::parse(r->body);
  const json& call = first["output"].back();
  ASSERT_EQ(call["type"], "function_call") << first.dump();
  EXPECT_EQ(call["name"], "get");
  EXPECT_EQ(call["namespace"], "weather");
  // Streaming: the added and done items carry the namespace too.
  auto s = ts.Post("/v1/responses", {{"input", "CALL_NAMESPACED"}, {"tools", tools}, {"stream", true}});
  ASSERT_TRUE(s);
  int named = 0;
  for (auto& [name, data] : testing::NamedSseEvents(s->body)) {
    if ((name == "response.output_item.added" || name == "response.output_item.done") &&
        data["item"]["type"] == "function_call") {
      EXPECT_EQ(data["item"]["name"], "get");
      EXPECT_EQ(data["item"]["namespace"], "weather");
      ++named;
    }
  }
  EXPECT_EQ(named, 2);
  // The stored conversation continues with the model's own (qualified) name.
  json input = {{{"type", "function_call_output"}, {"call_id", call["call_id"]}, {"output", "sunny"}}};
  auto next = ts.Post("/v1/responses", {{"previous_response_id", first["id"]}, {"input", input}, {"tools", tools}});
  ASSERT_TRUE(next);
  EXPECT_EQ(next->status, 200) << next->body;
}

TEST(AgentShapes, ClaudeCodeSystemMessagesInsideMessagesStayInPlaceAsSystemMessages) {
  auto parsed = ParseAnthropicRequest(ojson::parse(R"({
    "model": "m", "max_tokens": 10, "metadata": {"user_id": "u"}, "context_management": {"edits": []},
    "output_config": {"effort": "high"}, "thinking": {"type": "adaptive", "display": "omitted"},
    "system": [{"type": "text", "text": "You are an agent."}],
    "tools": [{"name": "Bash", "input_schema": {"type": "object"}},
              {"name": "Later", "input_schema": {"type": "object"}, "defer_loading": true}],
    "messages": [
      {"role": "user", "content": [{"type": "text", "text": "hello"}]},
      {"role": "system", "content": [{"type": "text", "text": "# Environment"}, {"type": "text", "text": "cwd"}]},
      {"role": "user", "content": [{"type": "search_result", "title": "T", "source": "https://x",
                                    "content": [{"type": "text", "text": "found"}]}]}
    ]})"),
                                      false);
  ASSERT_TRUE(std::holds_alternative<AnthropicRequest>(parsed)) << std::get<ApiError>(parsed).message;
  const AnthropicRequest& r = std::get<AnthropicRequest>(parsed);
  const ojson& m = r.chat.messages;
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[2], (ojson{{"role", "system"}, {"content", "# Environment\ncwd"}}));
  EXPECT_EQ(m[3]["content"][0]["text"], "T\nhttps://x\nfound");
  ASSERT_EQ(r.chat.tools.size(), 1u);  // the deferred tool is not offered
  EXPECT_EQ(r.chat.tools[0]["function"]["name"], "Bash");
}

TEST(AgentShapes, MessagesBlocksThisServerCannotRenderAreRefusedWithTheReason) {
  auto refuse = [](const char* messages) {
    auto r = ParseAnthropicRequest(ojson::parse(std::string(R"({"max_tokens": 5, "messages": )") + messages + "}"),
                                   false);
    EXPECT_TRUE(std::holds_alternative<ApiError>(r)) << messages;
    return std::holds_alternative<ApiError>(r) ? std::get<ApiError>(r) : ApiError{};
  };
  ApiError e = refuse(R"([{"role": "assistant", "content": [{"type": "server_tool_use", "id": "s", "name": "web_search"}]}])");
  EXPECT_EQ(e.status, 400);
  EXPECT_NE(e.message.find("Anthropic's server tools"), std::string::npos) << e.message;
  e = refuse(R"([{"role": "user", "content": [{"type": "mcp_tool_result", "tool_use_id": "x"}]}])");
  EXPECT_NE(e.message.find("MCP connector"), std::string::npos) << e.message;
  e = refuse(R"([{"role": "narrator", "content": "x"}])");
  EXPECT_NE(e.message.find("must be user, assistant or system"), std::string::npos) << e.message;
  e = refuse(R"([{"role": "user", "content": [{"type": "search_result", "title": "t"}]}])");
  EXPECT_NE(e.message.find("search_result"), std::string::npos) << e.message;
}

TEST(AgentShapes, AClaudeCodeShapedRequestIsAnsweredOverHttp) {
  TestServer ts;
  json body = json::parse(R"({
    "model": "m", "max_tokens": 20, "stream": false, "metadata": {"user_id": "{}"},
    "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
    "output_config": {"effort": "high"}, "thinking": {"type": "adaptive", "display": "omitted"},
    "system": [{"type": "text", "text": "x-anthropic-billing-header: cc_version=1; cch=ab12f;"},
               {"type": "text", "text": "You are an agent.", "cache_control": {"type": "ephemeral"}}],
    "messages": [{"role": "user", "content": "hi"}, {"role": "system", "content": "# Environment"}]})");
  auto r = ts.Post("/v1/messages", body);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
}

}  // namespace
}  // namespace rw::server
