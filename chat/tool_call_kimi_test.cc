// Kimi's tool-call section (chat/tool_call_kimi.h) through the output parser: calls, leniency, streaming.
#include "chat/tool_call_kimi.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "chat/output_parser.h"
#include "chat/output_parser_testing.h"

namespace rw::chat {
namespace {

ParserOptions Kimi() {
  ParserOptions o;
  o.format = ToolCallFormat::kKimi;
  o.tools = nlohmann::ordered_json::parse(
      R"([{"type":"function","function":{"name":"get_weather","parameters":{"type":"object",
          "properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city"]}}}])");
  return o;
}

const char* kKimiOutput =
    "Checking both.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
    "<|tool_call_argument_begin|>{\"city\": \"Oslo\", \"days\": 2}<|tool_call_end|>\n"
    "<|tool_call_begin|> functions.get_weather:1 <|tool_call_argument_begin|>{\"city\": \"Rome\", "
    "\"tags\": [\"<|x|>\", {\"k\": 1.5}]}<|tool_call_end|><|tool_calls_section_end|>";

TEST(KimiToolCalls, ParsesTheSectionAsParallelCalls) {
  ParsedMessage m = ParseOutput(kKimiOutput, Kimi());
  ExpectTwoWeatherCalls(m, R"({"city":"Oslo","days":2})", R"({"city":"Rome","tags":["<|x|>",{"k":1.5}]})");
  // Text after the section is content; an id without the prefix or index is the name.
  ParsedMessage j = ParseOutput(
      "<|tool_calls_section_begin|><|tool_call_begin|>ping<|tool_call_argument_begin|><|tool_call_end|>"
      "<|tool_calls_section_end|> done",
      Kimi());
  ASSERT_EQ(j.tool_calls.size(), 1u);
  EXPECT_EQ(j.tool_calls[0].name, "ping");
  EXPECT_EQ(j.tool_calls[0].arguments, "{}");
  EXPECT_EQ(j.content, "done");
  EXPECT_EQ(KimiCallName("functions.a.b:12"), "a.b");
  EXPECT_EQ(KimiCallName("functions.f:x"), "f:x");
}

TEST(KimiToolCalls, AreLenientAboutEndsButNeverInventCalls) {
  // The end of output closes a named call with what was written.
  ParsedMessage cut = ParseOutput(
      "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{\"a\": 1}", Kimi());
  ASSERT_EQ(cut.tool_calls.size(), 1u);
  EXPECT_EQ(cut.tool_calls[0].arguments, R"({"a":1})");
  // A missing <|tool_call_end|> before the section's end.
  ParsedMessage no_end = ParseOutput(
      "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{}"
      "<|tool_calls_section_end|>",
      Kimi());
  ASSERT_EQ(no_end.tool_calls.size(), 1u);
  EXPECT_TRUE(no_end.content.empty());
  ExpectMalformedStaysContent({"see <|tool_calls_section_begin|>not a call<|tool_calls_section_end|> here",
                       "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_end|>",
                       "<|tool_calls_section_begin|><|tool_call_begin|>\n<|tool_call_argument_begin|>{}"},
                              Kimi(), "<|tool_calls_section_begin|>");
  // An empty section is dropped: no call, no text.
  ParsedMessage empty = ParseOutput("a<|tool_calls_section_begin|><|tool_calls_section_end|>b", Kimi());
  EXPECT_TRUE(empty.tool_calls.empty());
  EXPECT_EQ(empty.content, "ab");
  // After a call, what is not a call ends the section; the rest is content, not lost.
  ParsedMessage half = ParseOutput(
      "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{}<|tool_call_end|>"
      "oops<|tool_calls_section_end|>",
      Kimi());
  ASSERT_EQ(half.tool_calls.size(), 1u);
  EXPECT_NE(half.content.find("oops"), std::string::npos);
}

TEST(KimiToolCalls, StreamTheNameFirstThenTheArguments) {
  OutputParser p(Kimi());
  ParserDelta d1 = p.Feed("Sure.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_wea");
  EXPECT_EQ(d1.content, "Sure.");
  EXPECT_TRUE(d1.tool_calls.empty());
  ParserDelta d2 = p.Feed("ther:0<|tool_call_argument_begin|>{\"city\": \"Os");
  ASSERT_EQ(d2.tool_calls.size(), 1u);
  EXPECT_EQ(d2.tool_calls[0].name, "get_weather");
  ParserDelta d3 = p.Feed("lo\"}<|tool_call_end|><|tool_calls_sec");
  ASSERT_EQ(d3.tool_calls.size(), 1u);
  EXPECT_EQ(d3.tool_calls[0].arguments, R"({"city":"Oslo"})");
  EXPECT_TRUE(p.Feed("tion_end|>").empty());
  EXPECT_TRUE(p.Finish().empty());
  EXPECT_EQ(p.message().tool_calls.size(), 1u);
}

TEST(KimiToolCalls, StreamingSplitAtEveryByteMatchesOneShot) {
  const std::vector<std::string> samples = {
      kKimiOutput,
      "a <|tool_calls_section_begin|>broken<|tool_calls_section_end|> b <|tool_calls_section_begin|>"
      "<|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|> c <|to",
      "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{\"a\": [1, \"un",
  };
  for (const auto& text : samples) ExpectStreamingMatchesOneShot(text, Kimi());
}

}  // namespace
}  // namespace rw::chat
