// The server's sampling flags (--temp, --top-k, --min-p, DRY, penalties, --grammar) reach the engine from
// every generation endpoint, and the grammar arrives compiled (the engine thread never parses it).
#include <gtest/gtest.h>

#include "server/testing/test_server.h"

namespace rw::server {
namespace {

using nlohmann::json;
using testing::TestServer;

TEST(SamplingDefaults, EveryGenerationEndpointSubmitsTheServersFlagsAndACompiledGrammar) {
  ServerConfig c;
  c.sampling_defaults.temperature = 0.25f;
  c.sampling_defaults.top_k = 7;
  c.sampling_defaults.min_p = 0.3f;
  c.sampling_defaults.dry_multiplier = 0.8f;
  c.sampling_defaults.frequency_penalty = 0.5f;
  c.sampling_defaults.grammar = R"(root ::= [a-zA-Z .]*)";
  TestServer ts(testing::FakeEngine::Options{}, c);
  const json user = json::array({{{"role", "user"}, {"content", "hi"}}});
  const std::vector<std::pair<std::string, json>> requests = {
      {"/v1/chat/completions", {{"messages", user}, {"max_tokens", 4}}},
      {"/v1/completions", {{"prompt", "hi"}, {"max_tokens", 4}}},
      {"/completion", {{"prompt", "hi"}, {"n_predict", 4}}},
      {"/v1/messages", {{"messages", user}, {"max_tokens", 4}}},
      {"/v1/responses", {{"input", "hi"}, {"max_output_tokens", 4}}},
  };
  for (const auto& [path, body] : requests) {
    auto r = ts.Post(path, body);
    ASSERT_TRUE(r) << path;
    ASSERT_EQ(r->status, 200) << path << ": " << r->body;
    const engine::GenerationRequest sent = ts.fake().engine.last_request();
    const engine::SamplingParams& s = sent.sampling;
    EXPECT_FLOAT_EQ(s.temperature, 0.25f) << path;
    EXPECT_EQ(s.top_k, 7) << path;
    EXPECT_FLOAT_EQ(s.min_p, 0.3f) << path;
    EXPECT_FLOAT_EQ(s.dry_multiplier, 0.8f) << path;
    EXPECT_FLOAT_EQ(s.frequency_penalty, 0.5f) << path;
    EXPECT_EQ(s.grammar, c.sampling_defaults.grammar) << path;
    EXPECT_NE(sent.compiled_grammar, nullptr) << path;
  }
}

TEST(SamplingDefaults, LogitBiasReachesTheEngineSortedMergedAndInsideTheVocabulary) {
  TestServer ts;
  json body = {
      {"prompt", "hi"}, {"max_tokens", 2}, {"logit_bias", json::array({{66, 1.0}, {65, 0.5}, {66, 2.0}})}};
  auto r = ts.Post("/v1/completions", body);
  ASSERT_EQ(r->status, 200) << r->body;
  const auto bias = ts.fake().engine.last_request().sampling.logit_bias;
  ASSERT_EQ(bias.size(), 2u);
  EXPECT_EQ(bias[0].token, 65);
  EXPECT_FLOAT_EQ(bias[0].bias, 0.5f);
  EXPECT_EQ(bias[1].token, 66);
  EXPECT_FLOAT_EQ(bias[1].bias, 3.0f);  // llama-server adds every entry
  body["logit_bias"] = json::array({{100000, 1.0}});
  auto bad = ts.Post("/v1/completions", body);
  EXPECT_EQ(bad->status, 400);
  EXPECT_NE(bad->body.find("outside the vocabulary"), std::string::npos) << bad->body;
}

TEST(LlamaNative, CompletionReturnsNProbsAsCompletionProbabilities) {
  TestServer ts;
  json j = json::parse(ts.Post("/completion", {{"prompt", "Say"}, {"n_predict", 3}, {"n_probs", 2}})->body);
  ASSERT_TRUE(j.contains("completion_probabilities")) << j.dump();
  const json& probs = j["completion_probabilities"];
  ASSERT_EQ(probs.size(), 3u);
  for (const auto& p : probs) {
    EXPECT_TRUE(p["id"].is_number_integer());
    EXPECT_TRUE(p["token"].is_string());
    EXPECT_TRUE(p["bytes"].is_array());
    EXPECT_LE(p["logprob"].get<double>(), 0.0);
    ASSERT_EQ(p["top_logprobs"].size(), 2u);
    EXPECT_TRUE(p["top_logprobs"][0]["id"].is_number_integer());
  }
  EXPECT_EQ(j["truncated"], false);
  json plain = json::parse(ts.Post("/completion", {{"prompt", "Say"}, {"n_predict", 3}})->body);
  EXPECT_FALSE(plain.contains("completion_probabilities"));
}

TEST(LlamaNative, CompletionIsTruncatedWhenTheContextFillsUp) {
  testing::FakeEngine::Options small;
  small.n_ctx = 16;
  TestServer ts(small);
  json j = json::parse(ts.Post("/completion", {{"prompt", "Say"}, {"n_predict", 100}})->body);
  EXPECT_EQ(j["stop_type"], "limit") << j.dump();
  EXPECT_EQ(j["truncated"], true) << j.dump();
}

}  // namespace
}  // namespace rw::server
