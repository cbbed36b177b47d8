// The published chat templates of the hybrid families (Nemotron Nano v2, Nemotron 3 Nano, Granite 4.0, LFM2)
// against Python's jinja2 renderings (tests/data/chat/make_hybrid_cases.py), byte for byte.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "base/file.h"
#include "chat/chat_render.h"

namespace rw::chat {
namespace {

using Json = nlohmann::ordered_json;

std::string Data(const std::string& name) { return std::string(REWIND_TEST_DATA) + "/chat/" + name; }

Json LoadCases() {
  auto text = ReadFileToString(Data("hybrid_cases.json"));
  EXPECT_TRUE(text.ok());
  return text.ok() ? Json::parse(*text) : Json::object();
}

TEST(HybridTemplates, EveryCaseRendersLikeJinja2OrFailsWithAClearError) {
  Json all = LoadCases();
  ASSERT_GE(all["cases"].size(), 100u);
  std::map<std::string, Template> templates;
  int rendered = 0;
  for (const auto& c : all["cases"]) {
    const std::string name = c["template"];
    SCOPED_TRACE(name + " " + c["conversation"].get<std::string>() +
                 " agp=" + c["add_generation_prompt"].dump() + " " + c["kwargs"].dump());
    if (!templates.count(name)) {
      auto src = ReadFileToString(Data(name));
      ASSERT_TRUE(src.ok());
      auto t = Template::Parse(*src);
      ASSERT_TRUE(t.ok()) << t.error().message;
      templates.emplace(name, *t);
    }
    const Json& conv = all["conversations"][c["conversation"].get<std::string>()];
    RenderOptions o;
    o.add_generation_prompt = c["add_generation_prompt"];
    o.bos_token = "<s>";
    o.eos_token = "</s>";
    o.chat_template_kwargs = c["kwargs"];
    auto r = RenderChat(templates.at(name), conv["messages"], conv["tools"], o);
    if (c.contains("error")) {
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.error().kind, ErrorKind::kInvalidArgument);
      EXPECT_FALSE(r.error().message.empty());
      continue;
    }
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->text, c["expected"].get<std::string>());
    ++rendered;
  }
  EXPECT_GE(rendered, 100);
}

TEST(HybridTemplates, AnEmptyConversationRaisesWhereJinja2Raises) {
  // jinja2 3.1.6 (Hugging Face's settings) on messages = []: templates that read messages[0].role raise
  // UndefinedError "list object has no element 0"; Qwen3.5's raises its own message; Kimi K2's renders.
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"granite-4.0.jinja", "list object has no element 0"},
      {"lfm2-8b-a1b.jinja", "list object has no element 0"},
      {"nemotron-3-nano.jinja", "list object has no element 0"},
      {"nemotron-nano-v2.jinja", "list object has no element 0"},
      {"qwen3-coder.jinja", "list object has no element 0"},
      {"qwen3.jinja", "list object has no element 0"},
      {"qwq.jinja", "list object has no element 0"},
      {"qwen3.5.jinja", "No messages provided."},
      {"kimi-k2.jinja", ""}};
  for (const auto& [name, error] : cases) {
    SCOPED_TRACE(name);
    auto src = ReadFileToString(Data(name));
    ASSERT_TRUE(src.ok());
    auto t = Template::Parse(*src);
    ASSERT_TRUE(t.ok()) << t.error().message;
    for (bool agp : {true, false}) {
      RenderOptions o;
      o.add_generation_prompt = agp;
      auto r = RenderChat(*t, Json::array(), nullptr, o);
      if (error.empty()) {
        EXPECT_TRUE(r.ok()) << r.error().message;
        continue;
      }
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.error().kind, ErrorKind::kInvalidArgument);
      EXPECT_NE(r.error().message.find(error), std::string::npos) << r.error().message;
    }
  }
}

}  // namespace
}  // namespace rw::chat
