// Bad requests get an OpenAI-shaped 4xx error and leave the server serving.
#include <gtest/gtest.h>

#include "server/testing/test_server.h"

namespace rw::server {
namespace {

using nlohmann::json;
using testing::TestServer;

struct BadRequest {
  std::string name;
  std::string path;
  std::string body;
  int status;
};

std::vector<BadRequest> Catalogue() {
  json msgs = json::array({{{"role", "user"}, {"content", "hi"}}});
  auto chat = [&](json extra) {
    extra["messages"] = msgs;
    return extra.dump();
  };
  return {
      {"malformed json", "/v1/chat/completions", "{\"messages\": [", 400},
      {"not an object", "/v1/chat/completions", "[1, 2]", 400},
      {"empty body", "/v1/chat/completions", "", 400},
      {"invalid utf-8", "/v1/chat/completions",
       "{\"messages\": [{\"role\": \"user\", \"content\": \"\xC3\x28\"}]}", 400},
      {"lone surrogate", "/v1/chat/completions",
       "{\"messages\": [{\"role\": \"user\", \"content\": \"\\ud800\"}]}", 400},
      {"missing messages", "/v1/chat/completions", "{}", 400},
      {"empty messages", "/v1/chat/completions", "{\"messages\": []}", 400},
      {"messages wrong type", "/v1/chat/completions", "{\"messages\": {\"role\": \"user\"}}", 400},
      {"unknown role", "/v1/chat/completions",
       json({{"messages", {{{"role", "robot"}, {"content", "x"}}}}}).dump(), 400},
      {"negative max_tokens", "/v1/chat/completions", chat({{"max_tokens", -1}}), 400},
      {"max_tokens string", "/v1/chat/completions", chat({{"max_tokens", "5"}}), 400},
      {"top_p above 1", "/v1/chat/completions", chat({{"top_p", 1.5}}), 400},
      {"negative temperature", "/v1/chat/completions", chat({{"temperature", -1}}), 400},
      {"n above 1", "/v1/chat/completions", chat({{"n", 3}}), 400},
      {"too many top_logprobs", "/v1/chat/completions", chat({{"logprobs", true}, {"top_logprobs", 30}}),
       400},
      {"template raise_exception", "/v1/chat/completions",
       json({{"messages", {{{"role", "user"}, {"content", "RAISE_EXCEPTION"}}}}}).dump(), 400},
      {"prompt longer than the context", "/v1/chat/completions",
       json({{"messages", {{{"role", "user"}, {"content", std::string(5000, 'x')}}}}}).dump(), 400},
      {"completion prompt missing", "/v1/completions", "{}", 400},
      {"completion token out of vocabulary", "/v1/completions", "{\"prompt\": [1, 99999]}", 400},
      {"completion empty prompt", "/v1/completions", "{\"prompt\": \"\"}", 400},
      {"tokenize without content", "/tokenize", "{}", 400},
      {"detokenize bad ids", "/detokenize", "{\"tokens\": [1, -4]}", 400},
      {"apply-template bad messages", "/apply-template", "{\"messages\": 5}", 400},
      {"slot action unknown", "/slots/0?action=explode", "{}", 400},
      {"unknown route", "/v1/nothing", "{}", 404},
  };
}

TEST(ServerErrors, EveryBadRequestGetsAJsonErrorAndTheServerKeepsServing) {
  TestServer ts;
  for (const auto& c : Catalogue()) {
    auto r = ts.PostRaw(c.path, c.body);
    ASSERT_TRUE(r) << c.name;
    EXPECT_EQ(r->status, c.status) << c.name << ": " << r->body;
    json j = json::parse(r->body, nullptr, false);
    ASSERT_TRUE(j.is_object()) << c.name << ": " << r->body;
    ASSERT_TRUE(j.contains("error")) << c.name;
    EXPECT_TRUE(j["error"]["message"].is_string()) << c.name;
    EXPECT_FALSE(j["error"]["message"].get<std::string>().empty()) << c.name;
    EXPECT_TRUE(j["error"]["type"].is_string()) << c.name;
  }
  auto good = ts.PostRaw("/v1/chat/completions",
                         json({{"messages", {{{"role", "user"}, {"content", "hi"}}}}}).dump());
  ASSERT_TRUE(good);
  EXPECT_EQ(good->status, 200);
}

TEST(ServerErrors, TemplateErrorsCarryTheTemplateMessage) {
  TestServer ts;
  auto r = ts.PostRaw("/v1/chat/completions",
                      json({{"messages", {{{"role", "user"}, {"content", "RAISE_EXCEPTION"}}}}}).dump());
  EXPECT_NE(json::parse(r->body)["error"]["message"].get<std::string>().find("raise_exception"),
            std::string::npos);
}

TEST(ServerErrors, ContextOverflowIsNamed) {
  TestServer ts;
  auto r = ts.PostRaw("/v1/chat/completions",
                      json({{"messages", {{{"role", "user"}, {"content", std::string(5000, 'x')}}}}}).dump());
  EXPECT_EQ(json::parse(r->body)["error"]["code"], "context_length_exceeded");
}

TEST(ServerErrors, WrongMethodIs405AndUnknownRouteIs404) {
  TestServer ts;
  auto get = ts.Client().Get("/v1/chat/completions");
  ASSERT_TRUE(get);
  EXPECT_EQ(get->status, 405);
  EXPECT_EQ(get->get_header_value("Allow"), "POST");
  EXPECT_TRUE(json::parse(get->body).contains("error"));
  auto post = ts.PostRaw("/health", "{}");
  EXPECT_EQ(post->status, 405);
  auto del = ts.Client().Delete("/v1/models");
  EXPECT_EQ(del->status, 405);
  auto unknown = ts.Client().Get("/nope");
  EXPECT_EQ(unknown->status, 404);
  EXPECT_EQ(json::parse(unknown->body)["error"]["type"], "not_found_error");
}

}  // namespace
}  // namespace rw::server
