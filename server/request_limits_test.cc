// Every bound of request_limits.h: a request past it gets a 400 that names the field and the flag, before the
// work that grows with it is done; the server's sampling defaults reach the Anthropic and Responses parsers.
#include "server/request_limits.h"

#include <gtest/gtest.h>

#include <string>

#include "server/anthropic_convert.h"
#include "server/request_parse.h"
#include "server/responses_api.h"

namespace rw::server {
namespace {

using json = nlohmann::ordered_json;

const json kMessages = json::array({{{"role", "user"}, {"content", "hi"}}});

json WithMessages(json extra) {
  extra["messages"] = kMessages;
  return extra;
}

// The error of parsing `body` as a chat request (through the body scan, as the server does), or null.
std::optional<ApiError> ChatError(const std::string& body, const RequestLimits& limits = RequestLimits()) {
  auto j = ParseJsonBody(body, limits);
  if (auto* e = std::get_if<ApiError>(&j)) return *e;
  auto r = ParseChatRequest(std::get<json>(j), ParseOptions(engine::SamplingParams(), limits));
  if (auto* e = std::get_if<ApiError>(&r)) return *e;
  return std::nullopt;
}

void ExpectLimit(const std::optional<ApiError>& e, const std::string& field, const std::string& flag) {
  ASSERT_TRUE(e.has_value()) << "accepted";
  EXPECT_EQ(e->status, 400);
  EXPECT_NE(e->message.find("'" + field), std::string::npos) << e->message;
  EXPECT_NE(e->message.find(flag), std::string::npos) << e->message;
}

TEST(RequestLimits, ABodyWithAMillionValuesIsRefusedByTheScanBeforeAnyDomIsBuilt) {
  std::string body = R"({"messages":[{"role":"user","content":"hi"}],"json_schema":{"enum":[)";
  for (int i = 0; i < 1000000; ++i) body += i ? ",1" : "1";
  body += "]}}";
  auto e = ChatError(body);
  ASSERT_TRUE(e.has_value());
  EXPECT_NE(e->message.find("--max-json-values"), std::string::npos) << e->message;
}

TEST(RequestLimits, AnObjectWithTooManyMembersIsRefusedNamingWhereItIs) {
  json bias = json::object();
  for (int i = 0; i < 5000; ++i) bias[std::to_string(i)] = 1;
  ExpectLimit(ChatError(WithMessages({{"logit_bias", bias}}).dump()), "logit_bias", "--max-json-members");
}

TEST(RequestLimits, EachSamplingListIsBoundedByItsFlag) {
  RequestLimits l;
  l.logit_bias = 3;
  l.dry_breakers = 2;
  l.dry_breaker_length = 5;
  l.stop = 2;
  l.stop_length = 4;
  l.top_logprobs = 5;
  json pairs = json::array({{1, 1.0}, {2, 1.0}, {3, 1.0}, {4, 1.0}});
  ExpectLimit(ChatError(WithMessages({{"logit_bias", pairs}}).dump(), l), "logit_bias", "--max-logit-bias");
  ExpectLimit(ChatError(WithMessages({{"dry_sequence_breakers", {"a", "b", "c"}}}).dump(), l),
              "dry_sequence_breakers", "--max-dry-breakers");
  ExpectLimit(ChatError(WithMessages({{"dry_sequence_breakers", {"abcdef"}}}).dump(), l),
              "dry_sequence_breakers", "--max-dry-breaker-length");
  ExpectLimit(ChatError(WithMessages({{"stop", {"a", "b", "c"}}}).dump(), l), "stop", "--max-stop");
  ExpectLimit(ChatError(WithMessages({{"stop", "abcde"}}).dump(), l), "stop", "--max-stop-length");
  auto e = ChatError(WithMessages({{"logprobs", true}, {"top_logprobs", 6}}).dump(), l);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "top_logprobs");
  EXPECT_FALSE(ChatError(WithMessages({{"logit_bias", {{"1", 1}, {"2", -1}, {"3", false}}},
                                       {"dry_sequence_breakers", {"ab", "\n"}},
                                       {"stop", {"x", "yz"}},
                                       {"logprobs", true},
                                       {"top_logprobs", 5}})
                             .dump(),
                         l));
}

TEST(RequestLimits, ToolsAreBoundedInCountAndInTheSizeOfTheirSchemasTogether) {
  RequestLimits l;
  l.tools = 2;
  l.schema_nodes = 20;
  auto tool = [](const std::string& name, int props) {
    json p = json::object();
    for (int i = 0; i < props; ++i) p["p" + std::to_string(i)] = {{"type", "string"}};
    return json{{"type", "function"},
                {"function", {{"name", name}, {"parameters", {{"type", "object"}, {"properties", p}}}}}};
  };
  ExpectLimit(ChatError(WithMessages({{"tools", {tool("a", 1), tool("b", 1), tool("c", 1)}}}).dump(), l),
              "tools", "--max-tools");
  // Each tool's schema fits; the two together do not.
  ExpectLimit(ChatError(WithMessages({{"tools", {tool("a", 4), tool("b", 4)}}}).dump(), l), "tools",
              "--max-schema-nodes");
  EXPECT_FALSE(ChatError(WithMessages({{"tools", {tool("a", 2), tool("b", 2)}}}).dump(), l));
}

TEST(RequestLimits, ASchemaIsBoundedInNodesAndDepthBeforeItBecomesAGrammar) {
  RequestLimits l;
  l.schema_nodes = 100;
  l.schema_depth = 6;
  json big_enum = json::array();
  for (int i = 0; i < 1000; ++i) big_enum.push_back(i);
  ExpectLimit(ChatError(WithMessages({{"json_schema", {{"enum", big_enum}}}}).dump(), l), "json_schema",
              "--max-schema-nodes");
  json deep = {{"type", "string"}};
  for (int i = 0; i < 5; ++i) deep = {{"type", "object"}, {"properties", {{"x", deep}}}};
  ExpectLimit(
      ChatError(
          WithMessages({{"response_format", {{"type", "json_schema"}, {"json_schema", {{"schema", deep}}}}}})
              .dump(),
          l),
      "response_format", "--max-schema-depth");
}

TEST(RequestLimits, AGrammarWhoseRepetitionsExplodeIsRefusedBeforeItIsExpanded) {
  // 10,000 copies of a 1,000-character literal: 10 million elements (80 MB) if expanded.
  const std::string g = "root ::= \"" + std::string(1000, 'a') + "\"{10000}";
  ExpectLimit(ChatError(WithMessages({{"grammar", g}}).dump()), "grammar", "--max-grammar-elements");
  RequestLimits l;
  l.grammar_rules = 50;
  ExpectLimit(ChatError(WithMessages({{"grammar", R"(root ::= "a"{0,200})"}}).dump(), l), "grammar",
              "--max-grammar-rules");
}

TEST(RequestLimits, AGrammarWhoseFirstStateWouldGrowWithTheSquareOfItsRulesIsRefused) {
  // r0 ::= r1 "x" | "y", r1 ::= r2 "x" | "y", ...: the start state holds one stack per rule, each as deep as
  // its rule's place in the chain (n^2 / 2 entries: 7 GB for 60,000 rules).
  std::string g = "root ::= r0\n";
  const int n = 20000;
  for (int i = 0; i < n; ++i)
    g += "r" + std::to_string(i) + " ::= r" + std::to_string(i + 1) + " \"x\" | \"y\"\n";
  g += "r" + std::to_string(n) + " ::= \"z\"\n";
  auto e = ChatError(WithMessages({{"grammar", g}}).dump());
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->code, "limit_exceeded");
  EXPECT_NE(e->message.find("nest too deeply"), std::string::npos) << e->message;
}

TEST(RequestLimits, AnAcceptedGrammarIsCompiledOnceByTheParserForTheEngine) {
  auto r = ParseChatRequest(WithMessages({{"grammar", R"(root ::= "yes" | "no")"}}));
  ASSERT_TRUE(std::holds_alternative<ChatRequest>(r));
  const SamplingRequest& s = std::get<ChatRequest>(r).gen.sampling;
  ASSERT_NE(s.compiled, nullptr);
  EXPECT_FALSE(s.compiled->elements.empty());
}

TEST(RequestLimits, FlagValuesOutOfRangeAreRefusedAtStartup) {
  RequestLimits l;
  EXPECT_EQ(l.Validate(), "");
  l.top_logprobs = 21;
  EXPECT_NE(l.Validate().find("--max-top-logprobs"), std::string::npos);
  l = RequestLimits();
  l.json_values = 0;
  EXPECT_NE(l.Validate().find("--max-json-values"), std::string::npos);
}

// The server's flags (--temp, --top-k, --min-p, DRY, --grammar...) are the defaults of every API's requests.
engine::SamplingParams ServerDefaults() {
  engine::SamplingParams d;
  d.temperature = 0.25f;
  d.top_k = 7;
  d.min_p = 0.3f;
  d.dry_multiplier = 0.8f;
  d.presence_penalty = 0.5f;
  d.grammar = R"(root ::= "ok")";
  return d;
}

void ExpectServerDefaults(const SamplingRequest& s) {
  EXPECT_FLOAT_EQ(s.params.temperature, 0.25f);
  EXPECT_EQ(s.params.top_k, 7);
  EXPECT_FLOAT_EQ(s.params.min_p, 0.3f);
  EXPECT_FLOAT_EQ(s.params.dry_multiplier, 0.8f);
  EXPECT_FLOAT_EQ(s.params.presence_penalty, 0.5f);
  EXPECT_EQ(s.params.grammar, R"(root ::= "ok")");
}

TEST(SamplingDefaults, ReachAnthropicMessages) {
  json body = {{"max_tokens", 10}, {"messages", kMessages}};
  auto r = ParseAnthropicRequest(body, false, ParseOptions(ServerDefaults()));
  ASSERT_TRUE(std::holds_alternative<AnthropicRequest>(r));
  ExpectServerDefaults(std::get<AnthropicRequest>(r).chat.gen.sampling);
  // The request's own values still win.
  body["top_k"] = 3;
  auto own = ParseAnthropicRequest(body, false, ParseOptions(ServerDefaults()));
  EXPECT_EQ(std::get<AnthropicRequest>(own).chat.gen.sampling.params.top_k, 3);
}

TEST(SamplingDefaults, ReachTheResponsesApi) {
  ResponseStore store;
  auto r = ParseResponsesRequest(json{{"input", "hi"}}, store);
  ASSERT_TRUE(std::holds_alternative<ResponsesRequest>(r));
  auto chat = ParseChatRequest(std::get<ResponsesRequest>(r).chat_body, ParseOptions(ServerDefaults()));
  ASSERT_TRUE(std::holds_alternative<ChatRequest>(chat));
  ExpectServerDefaults(std::get<ChatRequest>(chat).gen.sampling);
}

TEST(SamplingDefaults, ReachChatAndTextCompletions) {
  auto chat = ParseChatRequest(WithMessages({}), ParseOptions(ServerDefaults()));
  ExpectServerDefaults(std::get<ChatRequest>(chat).gen.sampling);
  auto text = ParseCompletionRequest(json{{"prompt", "x"}}, ParseOptions(ServerDefaults()));
  ExpectServerDefaults(std::get<CompletionRequest>(text).gen.sampling);
}

}  // namespace
}  // namespace rw::server
