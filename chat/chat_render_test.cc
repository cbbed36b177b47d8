// Chat rendering: the Qwen3.5 fixture cases byte for byte, the family templates against Python's jinja2,
// and message spans.
#include "chat/chat_render.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/file.h"

namespace rw::chat {
namespace {

using Json = nlohmann::ordered_json;

std::string Data(const std::string& name) { return std::string(REWIND_TEST_DATA) + "/chat/" + name; }

Template LoadTemplate(const std::string& name) {
  auto src = ReadFileToString(Data(name));
  EXPECT_TRUE(src.ok()) << name;
  auto t = Template::Parse(src.ok() ? *src : "");
  EXPECT_TRUE(t.ok()) << name << ": " << (t.ok() ? "" : t.error().message);
  return t.ok() ? *t : *Template::Parse("");
}

Json LoadJson(const std::string& name) {
  auto text = ReadFileToString(Data(name));
  EXPECT_TRUE(text.ok()) << name;
  return text.ok() ? Json::parse(*text) : Json::array();
}

RenderOptions OptionsFor(const Json& c) {
  RenderOptions o;
  o.add_generation_prompt = c.value("add_generation_prompt", false);
  if (c.contains("enable_thinking")) o.enable_thinking = c["enable_thinking"].get<bool>();
  return o;
}

Json ToolsOf(const Json& c) { return c.contains("tools") ? c["tools"] : Json(); }

TEST(ChatRender, MatchesEveryQwen35FixtureCaseByteForByte) {
  Template t = LoadTemplate("qwen3.5.jinja");
  Json cases = LoadJson("qwen3.5-cases.json");
  ASSERT_EQ(cases.size(), 15u);
  for (const auto& c : cases) {
    SCOPED_TRACE(c["name"].get<std::string>());
    auto r = RenderChat(t, c["messages"], ToolsOf(c), OptionsFor(c));
    if (c.contains("error")) {
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.error().message, c["error"].get<std::string>());
      EXPECT_EQ(r.error().kind, ErrorKind::kInvalidArgument);
    } else {
      ASSERT_TRUE(r.ok()) << r.error().message;
      EXPECT_EQ(r->text, c["expected"].get<std::string>());
    }
  }
}

TEST(ChatRender, FamilyTemplatesRenderLikeJinja2) {
  Json cases = LoadJson("family_cases.json");
  ASSERT_GE(cases.size(), 12u);
  for (const auto& c : cases) {
    SCOPED_TRACE(c["template"].get<std::string>() + " " + c["conversation"].get<std::string>());
    Template t = LoadTemplate(c["template"].get<std::string>());
    auto r = RenderChat(t, c["messages"], c["tools"], OptionsFor(c));
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->text, c["expected"].get<std::string>());
  }
}

// Every message of the Qwen3.5 cases starts where the template emitted its first byte: "<|im_start|>" for a
// turn of its own, "\n<tool_response>" for a tool result merged into the previous user turn, and a system
// message rendered inside the tools header starts the text.
TEST(ChatRender, SpansStartExactlyAtEachMessage) {
  Template t = LoadTemplate("qwen3.5.jinja");
  for (const auto& c : LoadJson("qwen3.5-cases.json")) {
    if (c.contains("error")) continue;
    SCOPED_TRACE(c["name"].get<std::string>());
    auto r = RenderChat(t, c["messages"], ToolsOf(c), OptionsFor(c));
    ASSERT_TRUE(r.ok());
    const auto& s = r->spans;
    ASSERT_TRUE(s.exact);
    ASSERT_EQ(s.message_start.size(), c["messages"].size());
    for (size_t i = 0; i < s.message_start.size(); ++i) {
      const Json& m = c["messages"][i];
      std::string at = r->text.substr(s.message_start[i]);
      std::string role = m["role"];
      if (i > 0) {
        EXPECT_LE(s.message_start[i - 1], s.message_start[i]);
      }
      if (role == "system") {
        EXPECT_EQ(s.message_start[i], 0u);
      } else if (role == "tool" && c["messages"][i - 1]["role"] == "tool") {
        EXPECT_EQ(at.rfind("\n<tool_response>", 0), 0u) << i;
      } else {
        std::string head = "<|im_start|>" + std::string(role == "tool" ? "user" : role);
        EXPECT_EQ(at.rfind(head, 0), 0u) << i << ": " << at.substr(0, 40);
      }
      // The message's own text lies inside its span.
      size_t end = i + 1 < s.message_start.size() ? s.message_start[i + 1] : s.generation_start;
      if (m.contains("content") && m["content"].is_string() && role != "system") {
        std::string content = m["content"];
        size_t p = content.find("</think>");
        if (p != std::string::npos) content = content.substr(content.rfind('\n') + 1);
        EXPECT_NE(r->text.substr(s.message_start[i], end - s.message_start[i]).find(content),
                  std::string::npos)
            << i;
      }
    }
    if (c.value("add_generation_prompt", false)) {
      std::string gen = r->text.substr(s.generation_start);
      EXPECT_EQ(gen.rfind("<|im_start|>assistant\n", 0), 0u) << gen;
    } else {
      EXPECT_EQ(s.generation_start, r->text.size());
    }
  }
}

TEST(ChatRender, EarlierTurnsKeepTheirSpanWhenReasoningIsStripped) {
  Template t = LoadTemplate("qwen3.5.jinja");
  Json msgs = Json::parse(R"([{"role":"user","content":"Q1"},
    {"role":"assistant","content":"A1","reasoning_content":"R1"},{"role":"user","content":"Q2"}])");
  auto r = RenderChat(t, msgs, Json(), RenderOptions{});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->text.substr(r->spans.message_start[1], r->spans.message_start[2] - r->spans.message_start[1]),
            "<|im_start|>assistant\nA1<|im_end|>\n");
}

TEST(ChatRender, ToolArgumentsAsJsonStringsRenderLikeObjects) {
  Template t = LoadTemplate("qwen3.5.jinja");
  Json as_obj = Json::parse(R"([{"role":"user","content":"x"},{"role":"assistant","content":"",
    "tool_calls":[{"type":"function","function":{"name":"f","arguments":{"b":1,"a":"s"}}}]}])");
  Json as_str = as_obj;
  as_str[1]["tool_calls"][0]["function"]["arguments"] = "{\"b\": 1, \"a\": \"s\"}";
  auto a = RenderChat(t, as_obj, Json(), RenderOptions{});
  auto b = RenderChat(t, as_str, Json(), RenderOptions{});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->text, b->text);
  EXPECT_NE(a->text.find("<parameter=b>\n1\n</parameter>\n<parameter=a>\ns\n</parameter>"),
            std::string::npos);
}

TEST(ChatRender, ToolsAreNormalisedLikeLlamaCpp) {
  Json tools = Json::parse(R"([{"type":"function","function":{"parameters":{"type":"object"},"name":"f",
    "strict":true}}])");
  Json n = NormalizeTools(tools);
  EXPECT_EQ(
      n.dump(),
      R"([{"type":"function","function":{"name":"f","description":"","parameters":{"type":"object"}}}])");
}

TEST(ChatRender, KwargsOverrideEnableThinking) {
  Template t = LoadTemplate("qwen3.5.jinja");
  Json msgs = Json::parse(R"([{"role":"user","content":"hi"}])");
  RenderOptions o;
  o.chat_template_kwargs = Json{{"enable_thinking", false}};
  auto r = RenderChat(t, msgs, Json(), o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->text.substr(r->spans.generation_start), "<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

TEST(ChatRender, TemplatesWithoutAMessageLoopFallBackToPrefixRendering) {
  auto t = Template::Parse(
      "{{ messages[0].content }}|{% if messages|length > 1 %}{{ messages[1].content }}|{% endif %}"
      "{% if add_generation_prompt %}GEN{% endif %}");
  ASSERT_TRUE(t.ok());
  auto r = RenderChat(*t, Json::parse(R"([{"role":"user","content":"aa"},{"role":"user","content":"bbb"}])"),
                      Json(), RenderOptions{});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->text, "aa|bbb|GEN");
  EXPECT_FALSE(r->spans.exact);
  EXPECT_EQ(r->spans.message_start, (std::vector<size_t>{0, 3}));
  EXPECT_EQ(r->spans.generation_start, 7u);
}

TEST(ChatRender, MessagesMustBeAnArray) {
  Template t = LoadTemplate("qwen3.5.jinja");
  EXPECT_FALSE(RenderChat(t, Json::object(), Json(), RenderOptions{}).ok());
}

TEST(ChatRender, SelectTemplatePrefersTheFileOverTheModelsTemplate) {
  auto from_model = SelectTemplate("model {{ 1 }}", "");
  ASSERT_TRUE(from_model.ok());
  EXPECT_EQ(*from_model->Render(Json::object()), "model 1");
  auto from_file = SelectTemplate("model", Data("qwq.jinja"));
  ASSERT_TRUE(from_file.ok());
  EXPECT_NE(from_file->source().find("<think>"), std::string::npos);
  EXPECT_FALSE(SelectTemplate("", "").ok());
  EXPECT_EQ(SelectTemplate("x", Data("no-such-file.jinja")).error().kind, ErrorKind::kNotFound);
}

TEST(MapSpansToTokens, MapsByteOffsetsToTheTokenContainingThem) {
  MessageSpans s;
  s.message_start = {0, 5, 7};
  s.generation_start = 12;
  std::vector<size_t> tok = {0, 3, 5, 9};  // tokens [0,3) [3,5) [5,9) [9,12)
  TokenSpans t = MapSpansToTokens(s, tok, 12);
  EXPECT_EQ(t.message_start, (std::vector<size_t>{0, 2, 2}));
  EXPECT_EQ(t.aligned, (std::vector<bool>{true, true, false}));
  EXPECT_EQ(t.generation_start, 4u);
  EXPECT_TRUE(t.generation_aligned);
}

}  // namespace
}  // namespace rw::chat
