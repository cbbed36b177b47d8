// Anthropic Messages API: request conversion, cache_control breakpoints, and the endpoint over real HTTP with
// the scripted fake engine.
#include <gtest/gtest.h>

#include "server/anthropic_convert.h"
#include "server/testing/test_server.h"

namespace rw::server {
namespace {

using nlohmann::json;
using ojson = nlohmann::ordered_json;
using testing::TestServer;

std::vector<std::pair<std::string, json>> NamedEvents(const std::string& body) {
  return testing::NamedSseEvents(body);
}

TEST(AnthropicConvert, MapsSystemBlocksToolUseToolResultsAndThinking) {
  ojson body = ojson::parse(R"({
    "model": "m", "max_tokens": 50, "stop_sequences": ["END"], "temperature": 0.5,
    "system": [{"type": "text", "text": "You are terse."}, {"type": "text", "text": "Be kind.",
               "cache_control": {"type": "ephemeral"}}],
    "thinking": {"type": "disabled"},
    "tools": [{"name": "get_weather", "description": "weather", "input_schema": {"type": "object"},
               "cache_control": {"type": "ephemeral"}}],
    "tool_choice": {"type": "any"},
    "messages": [
      {"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": [{"type": "thinking", "thinking": "need a tool", "signature": ""},
                                        {"type": "text", "text": "Checking."},
                                        {"type": "tool_use", "id": "toolu_1", "name": "get_weather",
                                         "input": {"city": "Paris"}}]},
      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"},
                                   {"type": "text", "text": "Thanks!", "cache_control": {"type": "ephemeral"}}]}
    ]})");
  auto parsed = ParseAnthropicRequest(body, false);
  ASSERT_TRUE(std::holds_alternative<AnthropicRequest>(parsed)) << std::get<ApiError>(parsed).message;
  const AnthropicRequest& r = std::get<AnthropicRequest>(parsed);
  const ojson& m = r.chat.messages;
  ASSERT_EQ(m.size(), 5u);
  EXPECT_EQ(m[0]["role"], "system");
  EXPECT_EQ(m[0]["content"], "You are terse.\nBe kind.");
  EXPECT_EQ(m[2]["role"], "assistant");
  EXPECT_EQ(m[2]["reasoning_content"], "need a tool");
  EXPECT_EQ(m[2]["tool_calls"][0]["id"], "toolu_1");
  EXPECT_EQ(m[2]["tool_calls"][0]["function"]["arguments"]["city"], "Paris");
  EXPECT_EQ(m[3]["role"], "tool");
  EXPECT_EQ(m[3]["tool_call_id"], "toolu_1");
  EXPECT_EQ(m[3]["content"], "sunny");
  EXPECT_EQ(m[4]["role"], "user");
  EXPECT_EQ(r.chat.tool_choice, "required");
  EXPECT_EQ(r.chat.template_kwargs["enable_thinking"], false);
  EXPECT_EQ(r.chat.gen.max_tokens, 50);
  EXPECT_EQ(r.chat.gen.stop, std::vector<std::string>{"END"});
  ASSERT_EQ(r.breakpoints.size(), 3u);
  EXPECT_EQ(r.breakpoints[0].message, 0);
  EXPECT_EQ(r.breakpoints[0].text, "Be kind.");
  EXPECT_EQ(r.breakpoints[1].message, 4);
  EXPECT_EQ(r.breakpoints[1].text, "Thanks!");
  EXPECT_EQ(r.breakpoints[2].message, -1);
}

TEST(AnthropicConvert, RefusesMissingMaxTokensAndUnknownBlocksInAnthropicShape) {
  auto missing =
      ParseAnthropicRequest(ojson::parse(R"({"messages": [{"role": "user", "content": "x"}]})"), false);
  ASSERT_TRUE(std::holds_alternative<ApiError>(missing));
  json e = AnthropicErrorJson(std::get<ApiError>(missing));
  EXPECT_EQ(e["type"], "error");
  EXPECT_EQ(e["error"]["type"], "invalid_request_error");
  EXPECT_NE(e["error"]["message"].get<std::string>().find("max_tokens"), std::string::npos);
  // count_tokens needs no max_tokens.
  EXPECT_TRUE(std::holds_alternative<AnthropicRequest>(
      ParseAnthropicRequest(ojson::parse(R"({"messages": [{"role": "user", "content": "x"}]})"), true)));
  auto bad = ParseAnthropicRequest(
      ojson::parse(R"({"max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "video"}]}]})"),
      false);
  ASSERT_TRUE(std::holds_alternative<ApiError>(bad));
  EXPECT_EQ(AnthropicErrorJson({503, "busy", "unavailable_error", "", ""})["error"]["type"],
            "overloaded_error");
}

TEST(AnthropicConvert, BreakpointsEndAtTheirBlockInTheRenderedPrompt) {
  std::string prompt = "<s>SYS tools</s><u>first part. second part.</u><u>next</u>GEN";
  std::vector<size_t> starts = {0, 16, 48};
  size_t gen = 59;
  std::vector<CacheBreakpoint> bps = {{1, "first part."}, {1, ""}, {-1, ""}, {2, "absent"}};
  auto offsets = BreakpointOffsets(bps, prompt, starts, gen, /*has_system=*/true);
  ASSERT_EQ(offsets.size(), 4u);
  EXPECT_EQ(prompt.substr(0, offsets[0]), "<s>SYS tools</s><u>first part.");
  EXPECT_EQ(offsets[1], 48u);  // the end of the message
  EXPECT_EQ(offsets[2], 16u);  // tools: the end of the system turn
  EXPECT_EQ(offsets[3], gen);  // text not found: the end of its message
}

TEST(AnthropicMessages, ReturnsThinkingTextUsageAndCacheReadTokens) {
  TestServer ts;
  json body = {
      {"model", "claude-x"}, {"max_tokens", 64}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}};
  auto r = ts.Post("/v1/messages", body);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  json j = json::parse(r->body);
  EXPECT_EQ(j["type"], "message");
  EXPECT_EQ(j["role"], "assistant");
  EXPECT_EQ(j["model"], "test-model");
  EXPECT_EQ(j["id"].get<std::string>().rfind("msg_", 0), 0u);
  ASSERT_EQ(j["content"].size(), 2u);
  EXPECT_EQ(j["content"][0]["type"], "thinking");
  EXPECT_EQ(j["content"][0]["thinking"], "Let me think about it.");
  EXPECT_EQ(j["content"][1]["type"], "text");
  EXPECT_EQ(j["content"][1]["text"], "Hello from the fake engine.");
  EXPECT_EQ(j["stop_reason"], "end_turn");
  EXPECT_TRUE(j["stop_sequence"].is_null());
  // The same prompt again: part of it is read from the cache, and input_tokens counts the rest.
  json again = json::parse(ts.Post("/v1/messages", body)->body);
  int cached = again["usage"]["cache_read_input_tokens"];
  EXPECT_GT(cached, 0);
  EXPECT_EQ(again["usage"]["input_tokens"].get<int>() + cached,
            static_cast<int>(ts.fake().engine.last_request().prompt.size()));
  EXPECT_EQ(again["usage"]["cache_creation_input_tokens"], 0);
  EXPECT_GT(again["usage"]["output_tokens"].get<int>(), 0);
}

TEST(AnthropicMessages, StreamsEventsFromMessageStartToMessageStopWithToolUse) {
  TestServer ts;
  json body = {{"max_tokens", 400},
               {"stream", true},
               {"tools", {{{"name", "get_weather"}, {"input_schema", {{"type", "object"}}}}}},
               {"messages", {{{"role", "user"}, {"content", "CALL_TOOLS_PARALLEL"}}}}};
  auto r = ts.Post("/v1/messages", body);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  auto events = NamedEvents(r->body);
  ASSERT_GE(events.size(), 6u);
  EXPECT_EQ(events.front().first, "message_start");
  EXPECT_EQ(events.front().second["message"]["usage"]["output_tokens"], 0);
  EXPECT_EQ(events.back().first, "message_stop");
  const auto& delta = events[events.size() - 2];
  EXPECT_EQ(delta.first, "message_delta");
  EXPECT_EQ(delta.second["delta"]["stop_reason"], "tool_use");
  // Blocks open and close in order; tool input arrives as input_json_delta pieces.
  int open = -1;
  std::vector<std::string> kinds, inputs;
  for (const auto& [name, data] : events) {
    EXPECT_EQ(data["type"], name);
    if (name == "content_block_start") {
      EXPECT_EQ(open, -1);
      open = data["index"];
      EXPECT_EQ(open, static_cast<int>(kinds.size()));
      kinds.push_back(data["content_block"]["type"]);
      inputs.emplace_back();
      if (kinds.back() == "tool_use") {
        EXPECT_EQ(data["content_block"]["name"], "get_weather");
        EXPECT_FALSE(data["content_block"]["id"].get<std::string>().empty());
      }
    } else if (name == "content_block_delta") {
      EXPECT_EQ(data["index"], open);
      if (data["delta"]["type"] == "input_json_delta")
        inputs[open] += data["delta"]["partial_json"].get<std::string>();
    } else if (name == "content_block_stop") {
      EXPECT_EQ(data["index"], open);
      open = -1;
    }
  }
  EXPECT_EQ(open, -1);
  ASSERT_EQ(kinds, (std::vector<std::string>{"thinking", "tool_use", "tool_use"}));
  EXPECT_EQ(json::parse(inputs[1])["city"], "Paris");
  EXPECT_EQ(json::parse(inputs[2])["city"], "Rome");
}

TEST(AnthropicMessages, CacheControlBreakpointsBecomeCheckpointHints) {
  TestServer ts;
  json body = {
      {"max_tokens", 4},
      {"system", {{{"type", "text"}, {"text", "Rules here."}, {"cache_control", {{"type", "ephemeral"}}}}}},
      {"messages",
       {{{"role", "user"},
         {"content",
          {{{"type", "text"}, {"text", "part one"}, {"cache_control", {{"type", "ephemeral"}}}},
           {{"type", "text"}, {"text", "part two"}}}}}}}};
  ASSERT_EQ(ts.Post("/v1/messages", body)->status, 200);
  auto sent = ts.fake().engine.last_request();
  std::string prompt;
  testing::FakeCodec codec;
  for (int32_t t : sent.prompt) prompt += codec.TokenToPiece(t, true);
  auto has_hint_after = [&](const std::string& text) {
    size_t at = prompt.find(text);
    EXPECT_NE(at, std::string::npos) << text;
    size_t target = at + text.size(), bytes = 0;
    int32_t pos = 0;
    while (bytes < target) bytes += codec.TokenToPiece(sent.prompt[pos++], true).size();
    EXPECT_EQ(bytes, target);
    return std::find(sent.checkpoint_hints.begin(), sent.checkpoint_hints.end(), pos) !=
           sent.checkpoint_hints.end();
  };
  EXPECT_TRUE(has_hint_after("Rules here."));
  EXPECT_TRUE(has_hint_after("part one"));
  EXPECT_FALSE(has_hint_after("part two"));
}

TEST(AnthropicMessages, CountsTokensAndAnswersErrorsInAnthropicShape) {
  TestServer ts(testing::FakeEngine::Options{}, [] {
    ServerConfig c;
    c.api_key = "secret";
    return c;
  }());
  json body = {{"model", "m"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}};
  auto cli = ts.Client();
  httplib::Headers key = {{"x-api-key", "secret"}};
  auto count = cli.Post("/v1/messages/count_tokens", key, body.dump(), "application/json");
  ASSERT_TRUE(count);
  ASSERT_EQ(count->status, 200) << count->body;
  EXPECT_GT(json::parse(count->body)["input_tokens"].get<int>(), 0);
  auto unauth = cli.Post("/v1/messages", body.dump(), "application/json");
  ASSERT_EQ(unauth->status, 401);
  EXPECT_EQ(json::parse(unauth->body)["error"]["type"], "authentication_error");
  auto bad = cli.Post("/v1/messages", key, body.dump(), "application/json");  // no max_tokens
  ASSERT_EQ(bad->status, 400);
  EXPECT_EQ(json::parse(bad->body)["type"], "error");
}

}  // namespace
}  // namespace rw::server
