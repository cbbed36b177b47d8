// The server over real HTTP on loopback with the scripted fake engine.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <regex>
#include <sstream>
#include <thread>

#include "server/request_parse.h"
#include "server/server_impl.h"
#include "server/testing/test_server.h"

namespace rw::server {
namespace {

using nlohmann::json;
using testing::SseData;
using testing::TestServer;

json UserChat(const std::string& text, json extra = json::object()) {
  extra["messages"] = json::array({{{"role", "user"}, {"content", text}}});
  return extra;
}

json Parse(const httplib::Result& r) {
  EXPECT_TRUE(r);
  return json::parse(r->body);
}

// All data events of a streamed response, parsed (the final [DONE] excluded and checked).
std::vector<json> Events(const httplib::Result& r) {
  EXPECT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_NE(r->get_header_value("Content-Type").find("text/event-stream"), std::string::npos);
  auto data = SseData(r->body);
  EXPECT_FALSE(data.empty());
  EXPECT_EQ(data.back(), "[DONE]");
  std::vector<json> out;
  for (size_t i = 0; i + 1 < data.size(); ++i) out.push_back(json::parse(data[i]));
  return out;
}

// A chat answer's reasoning_content and content, streamed (the deltas put together) or not.
std::pair<std::string, std::string> ReasoningAndContent(const httplib::Result& r, bool stream) {
  std::string reasoning, content;
  if (stream) {
    for (const auto& e : Events(r)) {
      if (e["choices"].empty()) continue;
      reasoning += e["choices"][0]["delta"].value("reasoning_content", "");
      content += e["choices"][0]["delta"].value("content", "");
    }
  } else {
    json j = json::parse(r->body);
    reasoning = j["choices"][0]["message"]["reasoning_content"];
    content = j["choices"][0]["message"]["content"];
  }
  return {reasoning, content};
}

TEST(ServerChat, ReturnsContentReasoningUsageTimingsAndCacheReport) {
  TestServer ts;
  auto r = ts.Post("/v1/chat/completions", UserChat("hi"));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  json j = json::parse(r->body);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["model"], "test-model");
  const json& msg = j["choices"][0]["message"];
  EXPECT_EQ(msg["role"], "assistant");
  EXPECT_EQ(msg["content"], "Hello from the fake engine.");
  EXPECT_EQ(msg["reasoning_content"], "Let me think about it.");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  auto sent = ts.fake().engine.last_request();
  EXPECT_EQ(j["usage"]["prompt_tokens"], sent.prompt.size());
  EXPECT_EQ(j["usage"]["total_tokens"].get<int>(),
            j["usage"]["prompt_tokens"].get<int>() + j["usage"]["completion_tokens"].get<int>());
  for (const char* k : {"prompt_n", "prompt_ms", "prompt_per_token_ms", "prompt_per_second", "predicted_n",
                        "predicted_ms", "predicted_per_token_ms", "predicted_per_second", "cache_n"}) {
    EXPECT_TRUE(j["timings"].contains(k)) << k;
  }
  for (const char* k : {"lcp", "resume_pos", "source", "extra_tokens", "reason"}) {
    EXPECT_TRUE(j["cache"].contains(k)) << k;
  }
}

TEST(ServerChat, ReportsCachedTokensOfASharedPrefix) {
  TestServer ts;
  json first = UserChat("hello there");
  ASSERT_EQ(ts.Post("/v1/chat/completions", first)->status, 200);
  json second = first;
  second["messages"].push_back({{"role", "assistant"}, {"content", "ok"}});
  second["messages"].push_back({{"role", "user"}, {"content", "more"}});
  json j = Parse(ts.Post("/v1/chat/completions", second));
  int cached = j["usage"]["prompt_tokens_details"]["cached_tokens"];
  EXPECT_GT(cached, 10);
  EXPECT_EQ(j["timings"]["cache_n"], cached);
  EXPECT_EQ(j["timings"]["prompt_n"].get<int>(), j["usage"]["prompt_tokens"].get<int>() - cached);
}

TEST(ServerChat, StreamsRoleThenDeltasThenFinishReasonUsageAndDone) {
  TestServer ts;
  auto r = ts.Post("/v1/chat/completions",
                   UserChat("hi", {{"stream", true}, {"stream_options", {{"include_usage", true}}}}));
  auto events = Events(r);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events[0]["choices"][0]["delta"]["role"], "assistant");
  std::string content, reasoning;
  std::string finish;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    const json& e = events[i];
    EXPECT_EQ(e["object"], "chat.completion.chunk");
    EXPECT_EQ(e["id"], events[0]["id"]);
    const json& ch = e["choices"][0];
    if (ch["delta"].contains("content")) content += ch["delta"]["content"].get<std::string>();
    if (ch["delta"].contains("reasoning_content"))
      reasoning += ch["delta"]["reasoning_content"].get<std::string>();
    if (!ch["finish_reason"].is_null()) finish = ch["finish_reason"];
  }
  EXPECT_EQ(content, "Hello from the fake engine.");
  EXPECT_EQ(reasoning, "Let me think about it.");
  EXPECT_EQ(finish, "stop");
  const json& usage_chunk = events.back();
  EXPECT_TRUE(usage_chunk["choices"].empty());
  EXPECT_GT(usage_chunk["usage"]["completion_tokens"].get<int>(), 5);
  EXPECT_TRUE(usage_chunk["usage"]["prompt_tokens_details"].contains("cached_tokens"));
  EXPECT_TRUE(usage_chunk["timings"].contains("prompt_n"));
}

TEST(ServerChat, ThinkingOffSendsNoReasoning) {
  TestServer ts;
  json j = Parse(ts.Post("/v1/chat/completions",
                         UserChat("hi", {{"chat_template_kwargs", {{"enable_thinking", false}}}})));
  EXPECT_FALSE(j["choices"][0]["message"].contains("reasoning_content"));
  EXPECT_EQ(j["choices"][0]["message"]["content"], "Hello from the fake engine.");
}

TEST(ServerChat, ReasoningBudgetEndsTheThoughtsAndContinuesFromThem) {
  TestServer ts;
  for (bool stream : {false, true}) {
    auto r = ts.Post("/v1/chat/completions", UserChat("hi", {{"reasoning_budget_tokens", 3}, {"stream", stream}}));
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    auto [reasoning, content] = ReasoningAndContent(r, stream);
    // Three tokens of the fake's thoughts, then the forced "\n</think>" (the fake parser keeps the newline that
    // the real one trims).
    EXPECT_EQ(reasoning, "Let\n");
    EXPECT_EQ(content, "Hello from the fake engine.");
    // The continuation is the first request's prompt, the tokens so far and the end of thinking.
    auto sent = ts.fake().engine.last_request();
    std::string prompt;
    for (int32_t t : sent.prompt) prompt += ts.fake().codec.TokenToPiece(t, true);
    EXPECT_EQ(prompt.substr(prompt.size() - 22), "<think>\nLet\n</think>\n\n") << prompt;
  }
  // Anthropic's thinking.budget_tokens is the same budget.
  json m = Parse(ts.Post("/v1/messages", {{"max_tokens", 100},
                                          {"thinking", {{"type", "enabled"}, {"budget_tokens", 5}}},
                                          {"messages", {{{"role", "user"}, {"content", "hi"}}}}}));
  EXPECT_EQ(m["content"][0]["thinking"], "Let m\n");
  EXPECT_EQ(m["content"][1]["text"], "Hello from the fake engine.");
}

// llama-server's --reasoning-budget-message / reasoning_budget_message: the text goes before the forced end
// of thinking, so the thoughts end with it and the answer follows.
TEST(ServerChat, ReasoningBudgetMessageIsInsertedBeforeTheForcedEndOfThinking) {
  ServerConfig config;
  config.reasoning_budget_message = " Time to answer.";
  TestServer ts({}, config);
  auto prompt_of_continuation = [&] {
    std::string prompt;
    for (int32_t t : ts.fake().engine.last_request().prompt) prompt += ts.fake().codec.TokenToPiece(t, true);
    return prompt;
  };
  for (bool stream : {false, true}) {
    auto r =
        ts.Post("/v1/chat/completions", UserChat("hi", {{"reasoning_budget_tokens", 3}, {"stream", stream}}));
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    auto [reasoning, content] = ReasoningAndContent(r, stream);
    EXPECT_EQ(reasoning, "Let Time to answer.\n");
    EXPECT_EQ(content, "Hello from the fake engine.");
    const std::string prompt = prompt_of_continuation();
    EXPECT_TRUE(prompt.ends_with("<think>\nLet Time to answer.\n</think>\n\n")) << prompt;
  }
  // A request's own message wins; an empty one forces the end tag alone.
  json j = Parse(ts.Post("/v1/chat/completions", UserChat("hi", {{"reasoning_budget_tokens", 3},
                                                                 {"reasoning_budget_message", " Enough."}})));
  EXPECT_EQ(j["choices"][0]["message"]["reasoning_content"], "Let Enough.\n");
  j = Parse(ts.Post("/v1/chat/completions",
                    UserChat("hi", {{"reasoning_budget_tokens", 3}, {"reasoning_budget_message", ""}})));
  EXPECT_EQ(j["choices"][0]["message"]["reasoning_content"], "Let\n");
  EXPECT_TRUE(prompt_of_continuation().ends_with("<think>\nLet\n</think>\n\n"));
  // Without a budget the message changes nothing.
  j = Parse(ts.Post("/v1/chat/completions", UserChat("hi")));
  EXPECT_EQ(j["choices"][0]["message"]["content"], "Hello from the fake engine.");
  EXPECT_EQ(j["choices"][0]["message"]["reasoning_content"].get<std::string>().find("Time to answer"),
            std::string::npos);
  // A message that is not a string is a 400.
  auto bad = ts.Post("/v1/chat/completions", UserChat("hi", {{"reasoning_budget_message", 5}}));
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
}

TEST(ServerChat, ReturnsToolCallsAsOpenAIToolCalls) {
  TestServer ts;
  json tools = {
      {{"type", "function"}, {"function", {{"name", "get_weather"}, {"parameters", {{"type", "object"}}}}}}};
  json j = Parse(ts.Post("/v1/chat/completions", UserChat("CALL_TOOL please", {{"tools", tools}})));
  const json& choice = j["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u);
  const json& call = choice["message"]["tool_calls"][0];
  EXPECT_EQ(call["type"], "function");
  EXPECT_FALSE(call["id"].get<std::string>().empty());
  EXPECT_EQ(call["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(call["function"]["arguments"].get<std::string>())["city"], "Paris");
  EXPECT_TRUE(choice["message"]["content"].is_null());

  // Streamed as OpenAI streams them: a first delta with id, type and name, then argument text deltas; two
  // calls in a row are parallel calls with indices 0 and 1.
  auto events = Events(ts.Post("/v1/chat/completions",
                               UserChat("CALL_TOOLS_PARALLEL please", {{"tools", tools}, {"stream", true}})));
  std::vector<std::string> names, args;
  int fragments = 0;
  for (const auto& e : events) {
    const json& d = e["choices"][0]["delta"];
    if (!d.contains("tool_calls")) continue;
    for (const auto& tc : d["tool_calls"]) {
      size_t index = tc["index"].get<size_t>();
      ++fragments;
      if (tc["function"].contains("name")) {
        EXPECT_EQ(index, names.size());
        EXPECT_FALSE(tc["id"].get<std::string>().empty());
        EXPECT_EQ(tc["type"], "function");
        names.push_back(tc["function"]["name"]);
        args.emplace_back();
      } else {
        EXPECT_FALSE(tc.contains("id"));
      }
      ASSERT_LT(index, args.size());
      args[index] += tc["function"]["arguments"].get<std::string>();
    }
  }
  ASSERT_EQ(names, (std::vector<std::string>{"get_weather", "get_weather"}));
  EXPECT_GT(fragments, 2);  // arguments came in pieces
  EXPECT_EQ(json::parse(args[0])["city"], "Paris");
  EXPECT_EQ(json::parse(args[1])["city"], "Rome");
  EXPECT_EQ(events.back()["choices"][0]["finish_reason"], "tool_calls");
}

TEST(ServerChat, StopStringEndsTheAnswerBeforeItInBothModes) {
  TestServer ts;
  json body =
      UserChat("STOPWORD", {{"stop", {"STOP-HERE"}}, {"chat_template_kwargs", {{"enable_thinking", false}}}});
  json j = Parse(ts.Post("/v1/chat/completions", body));
  EXPECT_EQ(j["choices"][0]["message"]["content"], "one two ");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  body["stream"] = true;
  std::string streamed;
  for (const auto& e : Events(ts.Post("/v1/chat/completions", body))) {
    const json& d = e["choices"][0]["delta"];
    if (d.contains("content")) streamed += d["content"].get<std::string>();
  }
  EXPECT_EQ(streamed, "one two ");
}

TEST(ServerChat, LogprobsRoundTripToTheEngineFloatsExactly) {
  TestServer ts;
  json j = Parse(ts.Post("/v1/chat/completions", UserChat("hi", {{"logprobs", true}, {"top_logprobs", 2}})));
  const json& content = j["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), j["usage"]["completion_tokens"].get<size_t>());
  for (size_t i = 0; i < content.size(); ++i) {
    float expected = -0.0123456789f * static_cast<float>(i % 7) - 1.0f / 3.0f;  // the fake engine's values
    float got = static_cast<float>(content[i]["logprob"].get<double>());
    EXPECT_EQ(got, expected) << i;
    ASSERT_EQ(content[i]["top_logprobs"].size(), 2u);
    EXPECT_EQ(content[i]["top_logprobs"][0]["token"], content[i]["token"]);
    EXPECT_TRUE(content[i]["bytes"].is_array());
  }
}

TEST(ServerChat, StreamedMultiByteCharactersArriveWhole) {
  TestServer ts;
  auto events = Events(
      ts.Post("/v1/chat/completions",
              UserChat("UTF8", {{"stream", true}, {"chat_template_kwargs", {{"enable_thinking", false}}}})));
  std::string content;
  for (const auto& e : events) {
    const json& d = e["choices"][0]["delta"];
    if (!d.contains("content")) continue;
    std::string piece = d["content"];
    EXPECT_TRUE(IsValidUtf8(piece));
    EXPECT_EQ(piece.find("\xEF\xBF\xBD"), std::string::npos);  // no replacement characters
    content += piece;
  }
  EXPECT_EQ(content, "h\xC3\xA9llo w\xC3\xB6rld \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x98\x80");
}

TEST(ServerChat, PassesMessageStartsGenerationHeaderAndClientCheckpointsAsHints) {
  TestServer ts;
  json body = {
      {"messages", {{{"role", "system"}, {"content", "sys"}}, {{"role", "user"}, {"content", "hi"}}}},
      {"checkpoints", {{{"position", 3}}}},
      {"max_tokens", 2},
      {"temperature", 0},
      {"seed", 9}};
  ASSERT_EQ(ts.Post("/v1/chat/completions", body)->status, 200);
  auto sent = ts.fake().engine.last_request();
  // Fake template: "<|im_start|>system\nsys<|im_end|>\n" is 1 + 7 + 3 + 1 + 1 = 13 tokens, then the user
  // message (1 + 5 + 2 + 1 + 1 = 10 tokens), then the generation header.
  // Plus the last two prompt positions (regenerate, re-rendered generation prompt).
  const int32_t n = static_cast<int32_t>(sent.prompt.size());
  EXPECT_EQ(sent.checkpoint_hints, (std::vector<int32_t>{3, 13, 23, n - 2, n - 1}));
  EXPECT_EQ(sent.max_tokens, 2);
  EXPECT_EQ(sent.sampling.temperature, 0.0f);
  EXPECT_EQ(sent.sampling.seed, 9u);
}

TEST(ServerChat, PassesContentPartBoundariesAsHints) {
  TestServer ts;
  json parts = {{{"type", "text"}, {"text", "abc"}}, {{"type", "text"}, {"text", "XY"}}};
  json body = {{"messages", {{{"role", "system"}, {"content", "sys"}}, {{"role", "user"}, {"content", parts}}}},
               {"max_tokens", 2},
               {"temperature", 0}};
  ASSERT_EQ(ts.Post("/v1/chat/completions", body)->status, 200);
  auto sent = ts.fake().engine.last_request();
  // The user message starts at 13 (see above): "<|im_start|>" (1) "user\n" (5) "abc" (3), so "XY" starts at 22.
  const int32_t n = static_cast<int32_t>(sent.prompt.size());
  EXPECT_EQ(sent.checkpoint_hints, (std::vector<int32_t>{13, 22, 26, n - 2, n - 1}));
}

// After a client hung up: its request is cancelled (once), the engine goes idle, the next request is served and
// the disconnect is counted.
void ExpectOneCancelThenServes(TestServer& ts) {
  for (int i = 0; i < 100 && ts.fake().engine.cancelled_count() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(ts.fake().engine.cancelled_count(), 1);
  EXPECT_TRUE(ts.fake().engine.WaitIdle(5000));
  EXPECT_EQ(ts.Post("/v1/chat/completions", UserChat("hi"))->status, 200);
  EXPECT_NE(ts.server().metrics().Text().find("rewind_server_client_disconnects_total 1"), std::string::npos);
}

TEST(ServerChat, ClientDisconnectInMidStreamCancelsTheRequest) {
  TestServer ts;
  auto client = ts.Client();
  std::string body = UserChat("LONG answer", {{"stream", true}}).dump();
  size_t received = 0;
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/chat/completions";
  req.headers = {{"Content-Type", "application/json"}};
  req.body = body;
  req.content_receiver = [&](const char*, size_t n, uint64_t, uint64_t) {
    received += n;
    return received < 500;  // hang up after a few chunks
  };
  auto r = client.send(req);
  EXPECT_FALSE(r);  // the client aborted
  ExpectOneCancelThenServes(ts);
}

TEST(ServerChat, ClientDisconnectWithoutStreamingCancelsTheRequest) {
  TestServer ts;
  const std::string body = UserChat("LONG answer").dump();  // seconds of tokens, answered at the end
  const std::string http = "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                           "application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(ts.port()));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(send(fd, http.data(), http.size(), 0), static_cast<ssize_t>(http.size()));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(ts.fake().engine.cancelled_count(), 0);  // still running while the client waits
  close(fd);
  ExpectOneCancelThenServes(ts);
}

TEST(ServerChat, EightConcurrentStreamsAllComplete) {
  testing::FakeEngine::Options o;
  o.token_delay_us = 2000;
  TestServer ts(o);
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      auto r = ts.Post("/v1/chat/completions", UserChat("client " + std::to_string(i), {{"stream", true}}));
      if (r && r->status == 200 && SseData(r->body).back() == "[DONE]") ++ok;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 8);
}

TEST(ServerCompletions, ReturnsTextForTextAndTokenPromptsWithLegacyLogprobs) {
  TestServer ts;
  json j = Parse(ts.Post("/v1/completions", {{"prompt", "hi"}, {"logprobs", 1}, {"max_tokens", 4}}));
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["choices"][0]["text"], "Hell");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  const json& lp = j["choices"][0]["logprobs"];
  EXPECT_EQ(lp["tokens"], json({"H", "e", "l", "l"}));
  EXPECT_EQ(lp["text_offset"], json({0, 1, 2, 3}));
  EXPECT_EQ(lp["top_logprobs"].size(), 4u);
  json t = Parse(ts.Post("/v1/completions", {{"prompt", {104, 105}}}));
  EXPECT_EQ(t["usage"]["prompt_tokens"], 2);
  auto events = Events(ts.Post("/v1/completions", {{"prompt", "hi"}, {"stream", true}}));
  std::string text;
  for (const auto& e : events) text += e["choices"][0]["text"].get<std::string>();
  EXPECT_EQ(text, "Hello from the fake engine.");
}

TEST(ServerTokenizer, TokenizesDetokenizesAndAppliesTheTemplate) {
  TestServer ts;
  json t = Parse(
      ts.Post("/tokenize", {{"content", "<|im_start|>hi"}, {"add_special", true}, {"parse_special", true}}));
  EXPECT_EQ(t["tokens"], json({256, 104, 105}));
  json plain = Parse(ts.Post("/tokenize", {{"content", "<|im_start|>"}, {"parse_special", false}}));
  EXPECT_EQ(plain["tokens"].size(), 12u);
  json pieces = Parse(ts.Post("/tokenize", {{"content", "h\xC3\xA9"}, {"with_pieces", true}}));
  EXPECT_EQ(pieces["tokens"][0], json({{"id", 104}, {"piece", "h"}}));
  EXPECT_EQ(pieces["tokens"][1]["piece"], json({0xC3}));  // a partial character comes back as bytes
  json d = Parse(ts.Post("/detokenize", {{"tokens", {256, 104, 105}}}));
  EXPECT_EQ(d["content"], "<|im_start|>hi");
  json p = Parse(ts.Post("/apply-template", {{"messages", {{{"role", "user"}, {"content", "hi"}}}}}));
  EXPECT_EQ(p["prompt"], "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n");
  // replay.py's minimum: the template + tokenize of a request equals what the chat endpoint submitted.
  ASSERT_EQ(ts.Post("/v1/chat/completions", UserChat("hi"))->status, 200);
  json tk =
      Parse(ts.Post("/tokenize", {{"content", p["prompt"]}, {"add_special", true}, {"parse_special", true}}));
  EXPECT_EQ(tk["tokens"].get<std::vector<int32_t>>(), ts.fake().engine.last_request().prompt);
}

TEST(ServerSlots, ListsSavesRestoresAndErasesSlots) {
  TestServer ts;
  ASSERT_EQ(ts.Post("/v1/chat/completions", UserChat("hi"))->status, 200);
  json slots = Parse(ts.Client().Get("/slots"));
  ASSERT_EQ(slots.size(), 4u);
  EXPECT_EQ(slots[0]["id"], 0);
  EXPECT_TRUE(slots[0].contains("is_processing"));
  json saved = Parse(ts.Post("/slots/0?action=save", {{"filename", "s0.bin"}}));
  EXPECT_EQ(saved["id_slot"], 0);
  EXPECT_EQ(saved["filename"], "s0.bin");
  EXPECT_GT(saved["n_saved"].get<int>(), 0);
  EXPECT_TRUE(saved["timings"].contains("save_ms"));
  json restored = Parse(ts.Post("/slots/0?action=restore", {{"filename", "s0.bin"}}));
  EXPECT_EQ(restored["n_restored"], saved["n_saved"]);
  EXPECT_TRUE(restored["timings"].contains("restore_ms"));
  auto missing = ts.Post("/slots/0?action=restore", {{"filename", "nope.bin"}});
  EXPECT_EQ(missing->status, 404);
  json erased = Parse(ts.Post("/slots/0?action=erase", json::object()));
  EXPECT_EQ(erased["id_slot"], 0);
  EXPECT_TRUE(erased.contains("n_erased"));
  EXPECT_EQ(ts.Post("/slots/9?action=erase", json::object())->status, 400);
  EXPECT_EQ(ts.Post("/slots/0?action=save", {{"filename", "../x"}})->status, 400);
}

TEST(ServerMetricsEndpoint, ServesPrometheusTextWithServerAndEngineCounters) {
  TestServer ts;
  ASSERT_EQ(ts.Post("/v1/chat/completions", UserChat("hi"))->status, 200);
  const std::string counted =
      "rewind_server_http_requests_total{route=\"/v1/chat/completions\",status=\"200\"} 1";
  httplib::Result r = ts.Client().Get("/metrics");
  // The per-route counter is bumped by httplib's logger right after the response went out: allow it a moment.
  for (int i = 0; i < 50 && r && r->body.find(counted) == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    r = ts.Client().Get("/metrics");
  }
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_NE(r->get_header_value("Content-Type").find("text/plain"), std::string::npos);
  std::regex sample(
      R"(^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[a-zA-Z_][a-zA-Z0-9_]*="[^"]*"(,[a-zA-Z_][a-zA-Z0-9_]*="[^"]*")*\})? -?[0-9.eE+-]+(inf|nan)?$)");
  std::regex comment(R"(^# (HELP|TYPE) [a-zA-Z_:][a-zA-Z0-9_:]* .*$)");
  std::istringstream in(r->body);
  std::string line;
  int samples = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    bool ok = std::regex_match(line, sample) || std::regex_match(line, comment);
    EXPECT_TRUE(ok) << line;
    samples += line[0] != '#';
  }
  EXPECT_GT(samples, 5);
  EXPECT_NE(r->body.find("rewind_server_generated_tokens_total"), std::string::npos);
  EXPECT_NE(r->body.find("rewind_engine_requests_total 1"), std::string::npos);
  EXPECT_NE(r->body.find(counted), std::string::npos);
}

TEST(ServerMisc, ServesModelsHealthAndCache) {
  TestServer ts;
  json m = Parse(ts.Client().Get("/v1/models"));
  EXPECT_EQ(m["object"], "list");
  EXPECT_EQ(m["data"][0]["id"], "test-model");
  EXPECT_EQ(m["data"][0]["meta"]["n_ctx"], 4096);
  json h = Parse(ts.Client().Get("/health"));
  EXPECT_EQ(h["status"], "ok");
  json c = Parse(ts.Client().Get("/cache"));
  EXPECT_TRUE(c.contains("nodes"));
}

TEST(ServerLoading, AnswersServiceUnavailableUntilTheModelIsLoaded) {
  TestServer ts({}, {}, /*ready=*/false);
  auto h = ts.Client().Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 503);
  auto c = ts.Post("/v1/chat/completions", UserChat("hi"));
  EXPECT_EQ(c->status, 503);
  EXPECT_EQ(json::parse(c->body)["error"]["message"], "Loading model");
  ts.server().SetBackend(ts.fake().backend());
  EXPECT_EQ(ts.Client().Get("/health")->status, 200);
  EXPECT_EQ(ts.Post("/v1/chat/completions", UserChat("hi"))->status, 200);
}

TEST(ServerAuth, RequiresTheApiKeyExceptOnPublicEndpoints) {
  ServerConfig config;
  config.api_key = "sekret";
  TestServer ts({}, config);
  auto denied = ts.Post("/v1/chat/completions", UserChat("hi"));
  EXPECT_EQ(denied->status, 401);
  EXPECT_EQ(json::parse(denied->body)["error"]["type"], "authentication_error");
  auto client = ts.Client();
  client.set_bearer_token_auth("wrong");
  EXPECT_EQ(client.Get("/metrics")->status, 401);
  client.set_bearer_token_auth("sekret");
  EXPECT_EQ(client.Post("/v1/chat/completions", UserChat("hi").dump(), "application/json")->status, 200);
  EXPECT_EQ(client.Get("/metrics")->status, 200);
  EXPECT_EQ(ts.Client().Get("/health")->status, 200);
  EXPECT_EQ(ts.Client().Get("/v1/models")->status, 200);
}

TEST(ConstantTimeEquals, ComparesContentAndLength) {
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abd"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abcd"));
  EXPECT_FALSE(ConstantTimeEquals("", "a"));
}

}  // namespace
}  // namespace rw::server
