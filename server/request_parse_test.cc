#include "server/request_parse.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "server/anthropic_convert.h"
#include "server/responses_api.h"

namespace rw::server {
namespace {

using json = nlohmann::ordered_json;

template <typename T>
const ApiError* ErrorOf(const ParseResult<T>& r) {
  return std::get_if<ApiError>(&r);
}

ParseResult<ChatRequest> Chat(const std::string& body) {
  auto j = ParseJsonBody(body);
  if (auto* e = std::get_if<ApiError>(&j)) return *e;
  return ParseChatRequest(std::get<json>(j));
}

const json kMessages = json::array({{{"role", "user"}, {"content", "hi"}}});

json WithMessages(json extra) {
  extra["messages"] = kMessages;
  return extra;
}

TEST(ParseChatRequest, AcceptsAMinimalRequestWithDefaults) {
  auto r = ParseChatRequest(WithMessages({}));
  ASSERT_EQ(ErrorOf(r), nullptr);
  const auto& c = std::get<ChatRequest>(r);
  EXPECT_EQ(c.gen.max_tokens, -1);
  EXPECT_FALSE(c.gen.stream);
  EXPECT_EQ(c.tool_choice, "auto");
  EXPECT_TRUE(c.tools.is_null());
  EXPECT_EQ(c.messages.size(), 1u);
}

TEST(ParseChatRequest, ReadsSamplingStreamAndLogprobFields) {
  auto r = ParseChatRequest(WithMessages({{"temperature", 0},
                                          {"top_p", 0.5},
                                          {"top_k", 40},
                                          {"min_p", 0.05},
                                          {"seed", 42},
                                          {"max_completion_tokens", 17},
                                          {"stop", "END"},
                                          {"logprobs", true},
                                          {"top_logprobs", 3},
                                          {"stream", true},
                                          {"stream_options", {{"include_usage", true}}}}));
  ASSERT_EQ(ErrorOf(r), nullptr);
  const auto& g = std::get<ChatRequest>(r).gen;
  EXPECT_EQ(g.sampling.params.temperature, 0.0f);
  EXPECT_EQ(g.sampling.params.top_p, 0.5f);
  EXPECT_EQ(g.sampling.params.top_k, 40);
  EXPECT_FLOAT_EQ(g.sampling.params.min_p, 0.05f);
  EXPECT_EQ(*g.seed, 42u);
  EXPECT_EQ(g.max_tokens, 17);
  EXPECT_EQ(g.stop, std::vector<std::string>{"END"});
  EXPECT_TRUE(g.logprobs);
  EXPECT_EQ(g.top_logprobs, 3);
  EXPECT_TRUE(g.stream);
  EXPECT_TRUE(g.include_usage);
}

TEST(ParseChatRequest, ServerDefaultsFillWhatTheRequestLeavesOut) {
  engine::SamplingParams d;
  d.top_k = 7;
  d.presence_penalty = 0.5f;
  d.grammar = "root ::= \"x\"";
  auto r = ParseChatRequest(WithMessages({{"top_k", 3}}), d);
  ASSERT_EQ(ErrorOf(r), nullptr);
  const auto& s = std::get<ChatRequest>(r).gen.sampling.params;
  EXPECT_EQ(s.top_k, 3);
  EXPECT_EQ(s.presence_penalty, 0.5f);
  EXPECT_EQ(s.grammar, d.grammar);
  auto own = ParseChatRequest(WithMessages({{"json_schema", {{"type", "boolean"}}}}), d);
  ASSERT_EQ(ErrorOf(own), nullptr);
  EXPECT_NE(std::get<ChatRequest>(own).gen.sampling.params.grammar, d.grammar);
}

TEST(ParseChatRequest, ReadsLlamaServerSamplingFields) {
  auto r = ParseChatRequest(WithMessages({{"repeat_penalty", 1.1},
                                          {"presence_penalty", 0.4},
                                          {"dry_multiplier", 0.8},
                                          {"dry_sequence_breakers", {"\n"}},
                                          {"mirostat", 2},
                                          {"samplers", "kt"},
                                          {"logit_bias", {{"15", -1.5}, {"hello", false}}},
                                          {"n_probs", 3}}));
  ASSERT_EQ(ErrorOf(r), nullptr);
  const auto& g = std::get<ChatRequest>(r).gen;
  const auto& s = g.sampling.params;
  EXPECT_FLOAT_EQ(s.repeat_penalty, 1.1f);
  EXPECT_FLOAT_EQ(s.presence_penalty, 0.4f);
  EXPECT_FLOAT_EQ(s.dry_multiplier, 0.8f);
  EXPECT_EQ(s.dry_sequence_breakers, std::vector<std::string>{"\n"});
  EXPECT_EQ(s.mirostat, 2);
  EXPECT_EQ(s.stages, (std::vector<engine::SamplerStage>{engine::SamplerStage::kTopK, engine::SamplerStage::kTemperature}));
  ASSERT_EQ(s.logit_bias.size(), 1u);
  EXPECT_EQ(s.logit_bias[0].token, 15);
  ASSERT_EQ(g.sampling.logit_bias_text.size(), 1u);
  EXPECT_EQ(g.sampling.logit_bias_text[0].first, "hello");
  EXPECT_TRUE(std::isinf(g.sampling.logit_bias_text[0].second));
  EXPECT_EQ(g.top_logprobs, 3);
}

TEST(ParseChatRequest, RejectsBadParametersWithTheFieldNamed) {
  struct Case {
    json extra;
    std::string param;
  };
  std::vector<Case> cases = {
      {{{"max_tokens", -5}}, "max_tokens"},
      {{{"max_tokens", "ten"}}, "max_tokens"},
      {{{"max_tokens", 0}}, "max_tokens"},
      {{{"temperature", -0.1}}, "temperature"},
      {{{"top_p", 1.5}}, "top_p"},
      {{{"top_k", -3}}, "top_k"},
      {{{"min_p", 2}}, "min_p"},
      {{{"n", 2}}, "n"},
      {{{"stream", "yes"}}, "stream"},
      {{{"stop", 5}}, "stop"},
      {{{"top_logprobs", 3}}, "top_logprobs"},
      {{{"logprobs", true}, {"top_logprobs", 21}}, "top_logprobs"},
      {{{"seed", 1.5}}, "seed"},
      {{{"tools", "x"}}, "tools"},
      {{{"tool_choice", "sometimes"}}, "tool_choice"},
      {{{"logit_bias", {{"1", "x"}}}}, "logit_bias"},
      {{{"response_format", {{"type", "json_schema"}}}}, "response_format"},
      {{{"response_format", {{"type", "json_schema"}, {"json_schema", {{"schema", {{"type", "string"}, {"pattern", "a+"}}}}}}}}, "response_format"},
      {{{"grammar", "root ::= undefined-rule"}}, "grammar"},
      {{{"grammar", "root ::= \"a\""}, {"json_schema", {{"type", "object"}}}}, "grammar"},
      {{{"samplers", {"top_k", "nope"}}}, "samplers"},
      {{{"mirostat", 3}}, "mirostat"},
      {{{"repeat_penalty", 0}}, "repeat_penalty"},
      {{{"dry_sequence_breakers", {""}}}, "dry_sequence_breakers"},
      {{{"chat_template_kwargs", 3}}, "chat_template_kwargs"},
      {{{"presence_penalty", 3}}, "presence_penalty"},
      {{{"checkpoints", {7}}}, "checkpoints"},
  };
  for (const auto& c : cases) {
    auto r = ParseChatRequest(WithMessages(c.extra));
    const ApiError* e = ErrorOf(r);
    ASSERT_NE(e, nullptr) << c.extra.dump();
    EXPECT_EQ(e->status, 400) << c.extra.dump();
    EXPECT_EQ(e->param, c.param) << c.extra.dump() << " -> " << e->message;
    EXPECT_FALSE(e->message.empty());
  }
}

TEST(ParseChatRequest, LeavesAnEmptyMessageListToTheTemplate) {
  // llama-server renders it: the template's own error (or prompt) decides, see server_errors_test.
  auto r = ParseChatRequest({{"messages", json::array()}});
  ASSERT_EQ(ErrorOf(r), nullptr);
  EXPECT_TRUE(std::get<ChatRequest>(r).messages.empty());
}

TEST(ParseChatRequest, RejectsMalformedMessages) {
  std::vector<json> bodies = {
      json::object(),
      {{"messages", "hi"}},
      {{"messages", {1}}},
      {{"messages", {{{"content", "no role"}}}}},
      {{"messages", {{{"role", "wizard"}, {"content", "x"}}}}},
      {{"messages", {{{"role", "user"}, {"content", 5}}}}},
      {{"messages", {{{"role", "user"}}}}},
      {{"messages", {{{"role", "user"}, {"content", {{{"type", "image_url"}, {"image_url", 5}}}}}}}},
      {{"messages", {{{"role", "user"}, {"content", {{{"type", "input_audio"}, {"input_audio", "x"}}}}}}}},
      {{"messages",
        {{{"role", "assistant"}, {"tool_calls", {{{"function", {{"name", "f"}, {"arguments", "{"}}}}}}}}}},
      {{"messages", {{{"role", "assistant"}, {"tool_calls", {{{"function", {{"arguments", "{}"}}}}}}}}}},
  };
  for (const auto& b : bodies) {
    auto r = ParseChatRequest(b);
    ASSERT_NE(ErrorOf(r), nullptr) << b.dump();
    EXPECT_EQ(ErrorOf(r)->status, 400);
  }
}

TEST(ParseChatRequest, NormalisesPartsToolCallsAndTools) {
  json body = {
      {"messages",
       {{{"role", "developer"}, {"content", "sys"}},
        {{"role", "user"},
         {"content", {{{"type", "text"}, {"text", "a"}}, {{"type", "text"}, {"text", "b"}}}}},
        {{"role", "assistant"},
         {"content", nullptr},
         {"tool_calls",
          {{{"id", "c1"},
            {"type", "function"},
            {"function", {{"name", "f"}, {"arguments", "{\"x\": 1}"}}}}}}},
        {{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "ok"}}}},
      {"tools", {{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", json::object()}}}}}},
      {"tool_choice", {{"type", "function"}, {"function", {{"name", "f"}}}}},
      {"chat_template_kwargs", {{"enable_thinking", false}}},
      {"checkpoints", {1, -1, {{"position", 12}}}}};
  auto r = ParseChatRequest(body);
  ASSERT_EQ(ErrorOf(r), nullptr) << ErrorOf(r)->message;
  const auto& c = std::get<ChatRequest>(r);
  EXPECT_EQ(c.messages[0]["role"], "system");
  EXPECT_EQ(c.messages[1]["content"].size(), 2u);
  EXPECT_EQ(c.messages[2]["tool_calls"][0]["function"]["arguments"], json({{"x", 1}}));
  EXPECT_EQ(c.messages[3]["tool_call_id"], "c1");
  EXPECT_EQ(c.tools.size(), 1u);
  EXPECT_EQ(c.tool_choice, "function:f");
  EXPECT_EQ(c.template_kwargs["enable_thinking"], false);
  EXPECT_EQ(c.checkpoint_messages, (std::vector<int32_t>{1, 3}));
  EXPECT_EQ(c.checkpoint_positions, (std::vector<int32_t>{12}));
}

TEST(ParseJsonBody, RejectsMalformedJsonInvalidUtf8AndDeepNesting) {
  for (std::string body :
       {std::string("{"), std::string("[1,2]"), std::string("\"x\""), std::string("{\"a\": \xff}"),
        std::string("{\"messages\": \"\xC3\x28\"}"), std::string("{\"a\": \"\\ud800\"}"),
        std::string(10000, '[') + std::string(10000, ']'), std::string()}) {
    auto r = ParseJsonBody(body);
    ASSERT_NE(ErrorOf(r), nullptr) << body.substr(0, 40);
    EXPECT_EQ(ErrorOf(r)->status, 400);
  }
  auto ok = ParseJsonBody("{\"a\": \"h\xC3\xA9\"}");
  EXPECT_EQ(ErrorOf(ok), nullptr);
}

TEST(ParseCompletionRequest, AcceptsTextTokensAndOneElementArrays) {
  for (json prompt : {json("hello"), json({1, 2, 3}), json({"hello"}), json({{1, 2}})}) {
    auto r = ParseCompletionRequest({{"prompt", prompt}, {"logprobs", 2}});
    ASSERT_EQ(ErrorOf(r), nullptr) << prompt.dump();
    EXPECT_EQ(std::get<CompletionRequest>(r).gen.top_logprobs, 2);
    EXPECT_TRUE(std::get<CompletionRequest>(r).gen.logprobs);
  }
  for (json body :
       {json::object(), json({{"prompt", 5}}), json({{"prompt", {"a", "b"}}}), json({{"prompt", {-1}}}),
        json({{"prompt", "x"}, {"echo", true}}), json({{"prompt", "x"}, {"logprobs", 50}})}) {
    EXPECT_NE(ErrorOf(ParseCompletionRequest(body)), nullptr) << body.dump();
  }
}

TEST(ParseSlotAction, ValidatesIdActionAndFilename) {
  EXPECT_EQ(ErrorOf(ParseSlotAction("0", "save", "{\"filename\": \"a.bin\"}")), nullptr);
  EXPECT_EQ(ErrorOf(ParseSlotAction("3", "erase", "")), nullptr);
  EXPECT_NE(ErrorOf(ParseSlotAction("x", "save", "{\"filename\": \"a.bin\"}")), nullptr);
  EXPECT_NE(ErrorOf(ParseSlotAction("0", "delete", "")), nullptr);
  EXPECT_NE(ErrorOf(ParseSlotAction("0", "save", "{}")), nullptr);
  EXPECT_NE(ErrorOf(ParseSlotAction("0", "save", "{\"filename\": \"../etc/passwd\"}")), nullptr);
  EXPECT_NE(ErrorOf(ParseSlotAction("0", "restore", "{\"filename\": \"a/b\"}")), nullptr);
}

TEST(IsValidUtf8, RejectsOverlongSurrogatesAndTruncation) {
  EXPECT_TRUE(IsValidUtf8("h\xC3\xA9 \xF0\x9F\x98\x80"));
  EXPECT_FALSE(IsValidUtf8("\xC0\xAF"));          // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xED\xA0\x80"));      // surrogate
  EXPECT_FALSE(IsValidUtf8("\xE6\x97"));          // truncated
  EXPECT_FALSE(IsValidUtf8("\xF4\x90\x80\x80"));  // > U+10FFFF
}

// Random and mutated bodies: every parser returns a value or an error; nothing throws or crashes.
TEST(RequestParse, SurvivesThousandsOfRandomAndMutatedBodies) {
  std::mt19937 rng(1234);
  std::vector<std::string> seeds = {
      WithMessages({{"max_tokens", 5}, {"stream", true}, {"stop", {"a", "b"}}}).dump(),
      json({{"messages",
             {{{"role", "assistant"},
               {"content", nullptr},
               {"tool_calls", {{{"function", {{"name", "f"}, {"arguments", "{}"}}}}}}}}},
            {"tools", {{{"type", "function"}, {"function", {{"name", "f"}}}}}},
            {"checkpoints", {0, {{"position", 3}}}}})
          .dump(),
      json({{"prompt", {1, 2, 3}}, {"logprobs", 3}, {"seed", -1}}).dump(),
      json({{"content", "abc"}, {"with_pieces", true}}).dump(),
      json({{"tokens", {1, 2}}}).dump(),
      json({{"max_tokens", 5},
            {"system", {{{"type", "text"}, {"text", "s"}, {"cache_control", {{"type", "ephemeral"}}}}}},
            {"thinking", {{"type", "enabled"}, {"budget_tokens", 9}}},
            {"tools", {{{"name", "f"}, {"input_schema", {{"type", "object"}}}}}},
            {"messages",
             {{{"role", "assistant"}, {"content", {{{"type", "tool_use"}, {"id", "t"}, {"name", "f"}, {"input", json::object()}}}}},
              {{"role", "user"}, {"content", {{{"type", "tool_result"}, {"tool_use_id", "t"}, {"content", "r"}}}}}}}})
          .dump(),
      json({{"instructions", "i"},
            {"input",
             {{{"type", "function_call"}, {"call_id", "c"}, {"name", "f"}, {"arguments", "{}"}},
              {{"type", "function_call_output"}, {"call_id", "c"}, {"output", "o"}},
              {{"type", "reasoning"}, {"summary", {{{"type", "summary_text"}, {"text", "r"}}}}},
              {{"role", "user"}, {"content", {{{"type", "input_text"}, {"text", "x"}}}}}}},
            {"tools", {{{"type", "function"}, {"name", "f"}}}}})
          .dump(),
  };
  ResponseStore store;
  const std::string alphabet = "{}[]\",:0123456789-.eE truefalsnul\\u\xC3\xA9\xFF";
  int parsed_ok = 0;
  for (int i = 0; i < 4000; ++i) {
    std::string body = seeds[rng() % seeds.size()];
    int edits = 1 + rng() % 6;
    for (int k = 0; k < edits && !body.empty(); ++k) {
      size_t pos = rng() % body.size();
      switch (rng() % 4) {
        case 0:
          body[pos] = alphabet[rng() % alphabet.size()];
          break;
        case 1:
          body.erase(pos, 1 + rng() % 4);
          break;
        case 2:
          body.insert(pos, 1, alphabet[rng() % alphabet.size()]);
          break;
        case 3:
          body.insert(pos, body.substr(rng() % body.size(), rng() % 16));
          break;
      }
    }
    if (i % 10 == 0) {  // pure noise
      body.clear();
      for (int k = rng() % 64; k > 0; --k) body.push_back(static_cast<char>(rng()));
    }
    auto j = ParseJsonBody(body);
    if (auto* v = std::get_if<json>(&j)) {
      ++parsed_ok;
      (void)ParseChatRequest(*v);
      (void)ParseApplyTemplateRequest(*v);
      (void)ParseCompletionRequest(*v);
      (void)ParseTokenizeRequest(*v);
      (void)ParseDetokenizeRequest(*v);
      (void)ParseAnthropicRequest(*v, i % 2 == 0);
      (void)ParseResponsesRequest(*v, store);
    }
    (void)ParseSlotAction(body.substr(0, i % 4), i % 2 ? "save" : "restore", body);
  }
  EXPECT_GT(parsed_ok, 100);  // the mutations still reach the field validators
}

}  // namespace
}  // namespace rw::server
