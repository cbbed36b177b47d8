// OpenAI Responses API, llama-server's /completion and /props, CORS, and the response store, over real HTTP
// with the scripted fake engine.
#include <gtest/gtest.h>

#include "server/responses_store.h"
#include "server/testing/test_server.h"

namespace rw::server {
namespace {

using nlohmann::json;
using testing::TestServer;

// The data of each event, checked to name its own type.
std::vector<json> ResponseEvents(const std::string& body) {
  std::vector<json> out;
  for (auto& [name, data] : testing::NamedSseEvents(body)) {
    EXPECT_EQ(data["type"], name);
    out.push_back(std::move(data));
  }
  return out;
}

TEST(ResponsesApi, AnswersWithReasoningAndMessageItemsAndUsage) {
  TestServer ts;
  auto r = ts.Post("/v1/responses", {{"model", "m"}, {"input", "hi"}, {"instructions", "Be brief."}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  json j = json::parse(r->body);
  EXPECT_EQ(j["object"], "response");
  EXPECT_EQ(j["status"], "completed");
  EXPECT_EQ(j["instructions"], "Be brief.");
  ASSERT_EQ(j["output"].size(), 2u);
  EXPECT_EQ(j["output"][0]["type"], "reasoning");
  EXPECT_EQ(j["output"][0]["content"][0]["text"], "Let me think about it.");
  EXPECT_EQ(j["output"][1]["type"], "message");
  EXPECT_EQ(j["output"][1]["content"][0]["type"], "output_text");
  EXPECT_EQ(j["output"][1]["content"][0]["text"], "Hello from the fake engine.");
  EXPECT_GT(j["usage"]["input_tokens"].get<int>(), 0);
  EXPECT_EQ(j["usage"]["total_tokens"].get<int>(),
            j["usage"]["input_tokens"].get<int>() + j["usage"]["output_tokens"].get<int>());
  // Instructions become a system message ahead of the input.
  auto sent = ts.fake().engine.last_request();
  std::string prompt;
  for (int32_t t : sent.prompt) prompt += testing::FakeCodec().TokenToPiece(t, true);
  EXPECT_LT(prompt.find("Be brief."), prompt.find("hi"));
}

TEST(ResponsesApi, ContinuesAStoredResponseWithFunctionCallOutput) {
  TestServer ts;
  json tools = {{{"type", "function"}, {"name", "get_weather"}, {"parameters", {{"type", "object"}}}}};
  json first = json::parse(ts.Post("/v1/responses", {{"input", "CALL_TOOL"}, {"tools", tools}})->body);
  ASSERT_EQ(first["status"], "completed") << first.dump();
  const json& call = first["output"].back();
  ASSERT_EQ(call["type"], "function_call");
  EXPECT_EQ(call["name"], "get_weather");
  EXPECT_EQ(json::parse(call["arguments"].get<std::string>())["city"], "Paris");
  json input = {{{"type", "function_call_output"}, {"call_id", call["call_id"]}, {"output", "sunny, 21C"}}};
  auto second =
      ts.Post("/v1/responses", {{"previous_response_id", first["id"]}, {"input", input}, {"tools", tools}});
  ASSERT_EQ(second->status, 200) << second->body;
  EXPECT_EQ(json::parse(second->body)["previous_response_id"], first["id"]);
  std::string prompt;
  for (int32_t t : ts.fake().engine.last_request().prompt)
    prompt += testing::FakeCodec().TokenToPiece(t, true);
  // The stored turn (the user's input, the assistant's call) comes before the tool output.
  size_t user = prompt.find("CALL_TOOL"), result = prompt.find("sunny, 21C");
  ASSERT_NE(user, std::string::npos);
  ASSERT_NE(result, std::string::npos);
  EXPECT_LT(user, prompt.find("get_weather", user));
  EXPECT_LT(prompt.find("get_weather", user), result);
  auto unknown = ts.Post("/v1/responses", {{"previous_response_id", "resp_nope"}, {"input", "x"}});
  EXPECT_EQ(unknown->status, 404);
}

TEST(ResponsesApi, StreamsResponseEventsInOrder) {
  TestServer ts;
  json tools = {{{"type", "function"}, {"name", "get_weather"}, {"parameters", {{"type", "object"}}}}};
  auto r = ts.Post("/v1/responses", {{"input", "CALL_TOOLS_PARALLEL"}, {"tools", tools}, {"stream", true}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  auto events = ResponseEvents(r->body);
  ASSERT_GE(events.size(), 4u);
  EXPECT_EQ(events[0]["type"], "response.created");
  EXPECT_EQ(events[1]["type"], "response.in_progress");
  EXPECT_EQ(events.back()["type"], "response.completed");
  for (size_t i = 0; i < events.size(); ++i) EXPECT_EQ(events[i]["sequence_number"], static_cast<int>(i));
  std::map<std::string, std::string> args;  // item id -> streamed arguments
  std::vector<std::string> done_types;
  for (const auto& e : events) {
    if (e["type"] == "response.function_call_arguments.delta")
      args[e["item_id"]] += e["delta"].get<std::string>();
    if (e["type"] == "response.output_item.done") {
      done_types.push_back(e["item"]["type"]);
      if (e["item"]["type"] == "function_call") {
        EXPECT_EQ(args[e["item"]["id"]], e["item"]["arguments"]);
      }
    }
  }
  EXPECT_EQ(done_types, (std::vector<std::string>{"reasoning", "function_call", "function_call"}));
  const json& final = events.back()["response"];
  ASSERT_EQ(final["output"].size(), 3u);
  EXPECT_EQ(json::parse(final["output"][2]["arguments"].get<std::string>())["city"], "Rome");
}

TEST(ResponseStore, ForgetsTheOldestPastItsCountAndEveryEntryPastItsAge) {
  ResponseStore store;
  store.Configure(2, 1 << 20, std::chrono::seconds(10));
  auto t0 = ResponseStore::Clock::now();
  store.Put("a", "", json::array(), t0);
  store.Put("b", "", json::array(), t0);
  store.Put("c", "", json::array(), t0);
  EXPECT_FALSE(store.Get("a", "", t0));
  EXPECT_TRUE(store.Get("b", "", t0));
  EXPECT_TRUE(store.Get("c", "", t0 + std::chrono::seconds(9)));
  EXPECT_FALSE(store.Get("c", "", t0 + std::chrono::seconds(11)));
  EXPECT_EQ(store.size(), 0u);
}

TEST(ResponseStore, DropsTheOldestPastItsByteBoundAndRefusesAnEntryLargerThanIt) {
  ResponseStore store;
  store.Configure(100, 1000, std::chrono::seconds(100));
  const json msg = json::array({{{"role", "user"}, {"content", std::string(300, 'x')}}});
  for (const char* id : {"a", "b", "c", "d"}) EXPECT_TRUE(store.Put(id, "", msg));
  EXPECT_LE(store.bytes(), 1000);
  EXPECT_FALSE(store.Get("a", ""));  // the oldest went first
  EXPECT_TRUE(store.Get("d", ""));
  EXPECT_FALSE(store.Put("big", "", json::array({{{"content", std::string(2000, 'y')}}})));
  EXPECT_FALSE(store.Get("big", ""));
}

TEST(ResponseStore, AnswersAnEntryOnlyToTheClientThatStoredIt) {
  ResponseStore store;
  store.Put("resp_1", "owner-a", json::array());
  EXPECT_TRUE(store.Get("resp_1", "owner-a"));
  EXPECT_FALSE(store.Get("resp_1", "owner-b"));
  EXPECT_FALSE(store.Get("resp_1", ""));
}

TEST(LlamaNative, CompletionAcceptsTextOrTokensAndAnswersInLlamaServerShape) {
  TestServer ts;
  json j = json::parse(ts.Post("/completion", {{"prompt", "Say"}, {"n_predict", 5}, {"id_slot", 1}})->body);
  EXPECT_EQ(j["stop"], true);
  EXPECT_EQ(j["tokens_predicted"], 5);
  EXPECT_EQ(j["stop_type"], "limit");
  EXPECT_EQ(j["content"].get<std::string>().size(), 5u);
  EXPECT_EQ(ts.fake().engine.last_request().slot_id, 1);
  EXPECT_EQ(ts.fake().engine.last_request().max_tokens, 5);
  auto tok = ts.Post("/completion", {{"prompt", {72, 105}}, {"cache_prompt", false}, {"stream", true}});
  ASSERT_EQ(tok->status, 200);
  auto data = testing::SseData(tok->body);
  ASSERT_GE(data.size(), 2u);
  EXPECT_EQ(json::parse(data.back())["stop"], true);
  EXPECT_EQ(json::parse(data.front())["stop"], false);
  EXPECT_NE(data.back(), "[DONE]");
  EXPECT_EQ(ts.fake().engine.last_request().prompt, (std::vector<int32_t>{72, 105}));
  EXPECT_FALSE(ts.fake().engine.last_request().cache_prompt);
}

TEST(LlamaNative, ServesPropsAndRefusesPropsUpdatesUnlessEnabled) {
  TestServer ts;
  json p = json::parse(ts.Client().Get("/props")->body);
  EXPECT_EQ(p["total_slots"], 4);
  EXPECT_EQ(p["default_generation_settings"]["n_ctx"], 4096);
  EXPECT_EQ(p["model_alias"], "test-model");
  EXPECT_EQ(ts.Post("/props", json::object())->status, 501);
  ServerConfig c;
  c.props_endpoint = true;
  TestServer enabled(testing::FakeEngine::Options{}, c);
  auto ok = enabled.Post("/props", json::object());
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(json::parse(ok->body)["success"], true);
  // A property to change is refused by name, never answered with a success that changed nothing.
  auto change = enabled.Post("/props", {{"n_ctx", 8}});
  EXPECT_EQ(change->status, 400);
  EXPECT_EQ(json::parse(change->body)["error"]["param"], "n_ctx");
}

TEST(LlamaNative, PropsNeedsTheKeyAndShowsTheModelFileWithoutItsFolder) {
  ServerConfig c;
  c.api_key = "k1,k2";
  TestServer ts(testing::FakeEngine::Options{}, c);
  EXPECT_EQ(ts.Client().Get("/props")->status, 401);
  auto cli = ts.Client();
  cli.set_bearer_token_auth("k2");
  auto r = cli.Get("/props");
  ASSERT_EQ(r->status, 200);
  const std::string path = json::parse(r->body)["model_path"];
  EXPECT_EQ(path.find('/'), std::string::npos) << path;
  EXPECT_EQ(ts.Client().Get("/health")->status, 200);
}

TEST(ResponsesApi, APreviousResponseOfAnotherKeyIsNotFound) {
  ServerConfig c;
  c.api_key = "alice";
  c.api_keys = {"bob"};
  TestServer ts(testing::FakeEngine::Options{}, c);
  auto as = [&](const char* key) {
    auto cli = ts.Client();
    cli.set_bearer_token_auth(key);
    return cli;
  };
  auto first = as("alice").Post("/v1/responses", json{{"input", "hi"}}.dump(), "application/json");
  ASSERT_EQ(first->status, 200) << first->body;
  const std::string id = json::parse(first->body)["id"];
  EXPECT_EQ(id.size(), std::string("resp_").size() + 32) << id;  // 128 random bits
  json next = {{"previous_response_id", id}, {"input", "more"}};
  EXPECT_EQ(as("alice").Post("/v1/responses", next.dump(), "application/json")->status, 200);
  auto other = as("bob").Post("/v1/responses", next.dump(), "application/json");
  EXPECT_EQ(other->status, 404) << other->body;
  EXPECT_EQ(as("mallory").Post("/v1/responses", next.dump(), "application/json")->status, 401);
}

TEST(Cors, AnswersPreflightAndAddsTheOriginToResponses) {
  ServerConfig c;
  c.api_key = "k";
  TestServer ts(testing::FakeEngine::Options{}, c);
  auto cli = ts.Client();
  httplib::Headers pre = {{"Origin", "http://localhost:5173"},
                          {"Access-Control-Request-Method", "POST"},
                          {"Access-Control-Request-Headers", "authorization, content-type"}};
  auto r = cli.Options("/v1/chat/completions", pre);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 204);  // no API key needed for a preflight
  EXPECT_EQ(r->get_header_value("Access-Control-Allow-Origin"), "http://localhost:5173");
  EXPECT_NE(r->get_header_value("Access-Control-Allow-Methods").find("POST"), std::string::npos);
  EXPECT_EQ(r->get_header_value("Access-Control-Allow-Headers"), "authorization, content-type");
  auto h = cli.Get("/health", {{"Origin", "http://localhost:5173"}});
  EXPECT_EQ(h->get_header_value("Access-Control-Allow-Origin"), "http://localhost:5173");
}

}  // namespace
}  // namespace rw::server
