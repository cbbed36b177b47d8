// Reasoning / tool-call parsing of model output, one-shot and streaming.
#include "chat/output_parser.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/file.h"
#include "chat/output_parser_testing.h"

namespace rw::chat {
namespace {

using Json = nlohmann::ordered_json;

Json WeatherTools() {
  return Json::parse(R"([{"type":"function","function":{"name":"get_weather","parameters":{"type":"object",
    "properties":{"city":{"type":"string"},"days":{"type":"integer"},"metric":{"type":"boolean"},
    "opts":{"type":"object"},"tags":{"type":"array"},"ratio":{"type":"number"},"zip":{"type":"string"}}}}}])");
}

ParserOptions Thinking() {
  ParserOptions o;
  o.starts_in_reasoning = true;
  o.tools = WeatherTools();
  return o;
}

const char* kToolCallOutput =
    "I should check.\n</think>\n\nLet me look that up.\n\n<tool_call>\n<function=get_weather>\n"
    "<parameter=city>\nSan Francisco\n</parameter>\n<parameter=days>\n3\n</parameter>\n"
    "<parameter=metric>\nTrue\n</parameter>\n<parameter=opts>\n{\"a\": [1, 2]}\n</parameter>\n"
    "<parameter=zip>\n94103\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=get_weather>\n"
    "<parameter=city>\nline one\nline two\n</parameter>\n</function>\n</tool_call>";

TEST(OutputParser, SplitsThinkBlockIntoReasoning) {
  ParserOptions o;
  ParsedMessage m = ParseOutput("<think>\nLet me think.\n</think>\n\nThe answer is 4.", o);
  EXPECT_EQ(m.reasoning_content, "Let me think.");
  EXPECT_EQ(m.content, "The answer is 4.");
  EXPECT_TRUE(m.tool_calls.empty());
}

TEST(OutputParser, StartsInsideThinkingWhenThePromptOpenedTheBlock) {
  ParsedMessage m = ParseOutput("Adding.\n</think>\n\n2+2 = 4.", Thinking());
  EXPECT_EQ(m.reasoning_content, "Adding.");
  EXPECT_EQ(m.content, "2+2 = 4.");
}

TEST(OutputParser, DetectsPromptsThatOpenTheThinkBlock) {
  EXPECT_TRUE(PromptEndsInsideThinking("<|im_start|>assistant\n<think>\n"));
  EXPECT_FALSE(PromptEndsInsideThinking("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  EXPECT_FALSE(PromptEndsInsideThinking("<|im_start|>assistant\n"));
  EXPECT_TRUE(
      PromptEndsInsideThinking("<think>\nold\n</think>\n\nA<|im_end|>\n<|im_start|>assistant\n<think>\n"));
}

TEST(OutputParser, ThinkingDisabledOutputIsAllContent) {
  ParsedMessage m = ParseOutput("Just an answer with a <think> mention.", ParserOptions{});
  EXPECT_EQ(m.content, "Just an answer with a <think> mention.");
  EXPECT_EQ(m.reasoning_content, "");
}

TEST(OutputParser, UnfinishedReasoningStaysReasoning) {
  ParsedMessage m = ParseOutput("still thinking when the budget ran out", Thinking());
  EXPECT_EQ(m.reasoning_content, "still thinking when the budget ran out");
  EXPECT_EQ(m.content, "");
}

ParserOptions Legacy(ParserOptions o) {
  o.reasoning_in_content = true;
  return o;
}

TEST(OutputParser, DeepseekLegacyKeepsTheThinkBlockInTheContentAsWell) {
  ParsedMessage m = ParseOutput("<think>\nLet me think.\n</think>\n\nThe answer is 4.", Legacy({}));
  EXPECT_EQ(m.reasoning_content, "Let me think.");
  EXPECT_EQ(m.content, "<think>Let me think.</think>The answer is 4.");
  // A block the prompt opened gets its opening tag back; the one before a tool call is unclosed.
  m = ParseOutput("Adding.\n</think>\n\n2+2 = 4.", Legacy(Thinking()));
  EXPECT_EQ(m.content, "<think>Adding.</think>2+2 = 4.");
  m = ParseOutput(kToolCallOutput, Legacy(Thinking()));
  EXPECT_EQ(m.reasoning_content, "I should check.");
  EXPECT_EQ(m.content, "<think>I should check.</think>Let me look that up.");
  EXPECT_EQ(m.tool_calls.size(), 2u);
  m = ParseOutput("cut off mid-thought", Legacy(Thinking()));
  EXPECT_EQ(m.content, "<think>cut off mid-thought");
  EXPECT_EQ(m.reasoning_content, "cut off mid-thought");
  // Empty reasoning leaves no tags.
  m = ParseOutput("<think>\n\n</think>\n\nHi", Legacy({}));
  EXPECT_EQ(m.content, "Hi");
  EXPECT_EQ(m.reasoning_content, "");
}

TEST(OutputParser, ParsesQwenToolCallsWithValuesTypedByTheSchema) {
  ParsedMessage m = ParseOutput(kToolCallOutput, Thinking());
  EXPECT_EQ(m.reasoning_content, "I should check.");
  EXPECT_EQ(m.content, "Let me look that up.");
  ASSERT_EQ(m.tool_calls.size(), 2u);
  EXPECT_EQ(m.tool_calls[0].name, "get_weather");
  EXPECT_EQ(m.tool_calls[0].arguments,
            R"({"city":"San Francisco","days":3,"metric":true,"opts":{"a":[1,2]},"zip":"94103"})");
  EXPECT_EQ(m.tool_calls[1].arguments, R"({"city":"line one\nline two"})");
}

TEST(OutputParser, ToolCallStraightAfterReasoningEndsTheReasoning) {
  ParsedMessage m = ParseOutput(
      "need "
      "weather\n<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n</function>\n</"
      "tool_call>",
      Thinking());
  EXPECT_EQ(m.reasoning_content, "need weather");
  EXPECT_EQ(m.content, "");
  ASSERT_EQ(m.tool_calls.size(), 1u);
}

TEST(OutputParser, ValuesThatDoNotFitTheSchemaFallBackToStrings) {
  Json s_int = Json::parse(R"({"type":"integer"})");
  Json s_num = Json::parse(R"({"type":["number","null"]})");
  EXPECT_EQ(ParameterValue("12", &s_int), Json(12));
  EXPECT_EQ(ParameterValue("twelve", &s_int), Json("twelve"));
  EXPECT_EQ(ParameterValue("1.5", &s_num), Json(1.5));
  EXPECT_EQ(ParameterValue("null", &s_num), Json(nullptr));
  EXPECT_EQ(ParameterValue("{\"a\":1}", nullptr), Json("{\"a\":1}"));
}

TEST(OutputParser, MalformedToolCallsDegradeToContent) {
  ExpectMalformedStaysContent({
      "text <tool_call>\nnot a function\n</tool_call> after",
      "<tool_call>\n<function=>\n</function>\n</tool_call>",
      "<tool_call>\n<function=f>\nno parameter\n</tool_call>",
      "<tool_call>\n{\"arguments\": {\"x\": 1}}\n</tool_call>",
      "<tool_call>\n{not json}\n</tool_call>",
  },
                              ParserOptions{}, "<tool_call>");
}

TEST(OutputParser, CallsWhoseStructureWasConfirmedAreCompletedWhenTheirEndIsMissing) {
  ParsedMessage a =
      ParseOutput("<tool_call>\n<function=f>\n<parameter=x>\n1\n</parameter>\n</tool_call>", ParserOptions{});
  ASSERT_EQ(a.tool_calls.size(), 1u);
  EXPECT_EQ(a.tool_calls[0].arguments, R"({"x":"1"})");
  ParsedMessage b = ParseOutput("<tool_call>\n<function=f>\n<parameter=x>\nnever closed", ParserOptions{});
  ASSERT_EQ(b.tool_calls.size(), 1u);
  EXPECT_EQ(b.tool_calls[0].arguments, R"({"x":"never closed"})");
  ParsedMessage c =
      ParseOutput("<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": [1, \"x", ParserOptions{});
  ASSERT_EQ(c.tool_calls.size(), 1u);
  EXPECT_EQ(c.tool_calls[0].arguments, R"({"a": [1, "x"]})");
  EXPECT_TRUE(Json::parse(c.tool_calls[0].arguments).is_object());
}

TEST(OutputParser, ParsesHermesJsonToolCallsAsQwen3AndQwen3NextWriteThem) {
  ParsedMessage m = ParseOutput(
      "<think>\nplan\n</think>\n\nChecking.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
      "{\"city\": \"Paris\", \"days\": 2}}\n</tool_call>\n<tool_call>\n{\"arguments\": \"{\\\"city\\\": "
      "\\\"Rome\\\"}\", \"name\": \"get_weather\"}\n</tool_call>",
      ParserOptions{});
  EXPECT_EQ(m.reasoning_content, "plan");
  EXPECT_EQ(m.content, "Checking.");
  ASSERT_EQ(m.tool_calls.size(), 2u);
  EXPECT_EQ(m.tool_calls[0].name, "get_weather");
  EXPECT_EQ(m.tool_calls[0].arguments, R"({"city": "Paris", "days": 2})");
  EXPECT_EQ(m.tool_calls[1].name, "get_weather");
  EXPECT_EQ(m.tool_calls[1].arguments, R"({"city": "Rome"})");
  ParsedMessage none = ParseOutput("<tool_call>\n{\"name\": \"ping\"}\n</tool_call>", ParserOptions{});
  ASSERT_EQ(none.tool_calls.size(), 1u);
  EXPECT_EQ(none.tool_calls[0].arguments, "{}");
}

TEST(OutputParser, StreamsArgumentsAsTheyAreWritten) {
  ParserOptions o;
  o.tools = WeatherTools();
  OutputParser p(o);
  ParserDelta d1 = p.Feed("<tool_call>\n<function=get_weather>\n<parameter=city>\nSan Fr");
  ASSERT_EQ(d1.tool_calls.size(), 1u);
  EXPECT_EQ(d1.tool_calls[0].name, "get_weather");
  EXPECT_EQ(d1.tool_calls[0].arguments, R"({"city":"San Fr)");
  ParserDelta d2 = p.Feed("ancisco\n</param");
  ASSERT_EQ(d2.tool_calls.size(), 1u);
  EXPECT_EQ(d2.tool_calls[0].name, "");
  EXPECT_EQ(d2.tool_calls[0].arguments, "ancisco");
  ParserDelta d3 = p.Feed("eter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>");
  ASSERT_EQ(d3.tool_calls.size(), 1u);
  EXPECT_EQ(d3.tool_calls[0].arguments, R"(","days":3})");
  OutputParser j(o);
  ParserDelta e1 = j.Feed("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par");
  ASSERT_EQ(e1.tool_calls.size(), 1u);
  EXPECT_EQ(e1.tool_calls[0].name, "get_weather");
  EXPECT_EQ(e1.tool_calls[0].arguments, R"({"city": "Par)");
  ParserDelta e2 = j.Feed("is\"}}\n</tool_call>");
  EXPECT_EQ(e2.tool_calls.at(0).arguments, R"(is"})");
  EXPECT_EQ(j.message().tool_calls.at(0).arguments, R"({"city": "Paris"})");
}

TEST(OutputParser, ToolCallMissingOnlyItsClosingTagAtTheEndIsAccepted) {
  ParsedMessage m =
      ParseOutput("<tool_call>\n<function=f>\n<parameter=x>\n1\n</parameter>\n</function>", ParserOptions{});
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(m.tool_calls[0].arguments, R"({"x":"1"})");
}

TEST(OutputParser, NeverStreamsAPartialTagAsContent) {
  OutputParser p(ParserOptions{});
  ParserDelta d1 = p.Feed("Hello <tool");
  EXPECT_EQ(d1.content, "Hello");
  ParserDelta d2 = p.Feed("_c");
  EXPECT_EQ(d2.content, "");
  ParserDelta d3 = p.Feed("ap> and more");
  EXPECT_EQ(d3.content, " <tool_cap> and more");
  OutputParser q(Thinking());
  EXPECT_EQ(q.Feed("abc </thi").reasoning, "abc");
  ParserDelta d4 = q.Feed("nk>\n\nok");
  EXPECT_EQ(d4.reasoning, "");
  EXPECT_EQ(d4.content, "ok");
}

TEST(OutputParser, StreamingSplitAtEveryByteMatchesOneShot) {
  struct Sample {
    std::string text;
    ParserOptions opt;
  };
  ParserOptions plain;
  plain.tools = WeatherTools();
  std::vector<Sample> samples = {
      {kToolCallOutput, Thinking()},
      {"<think>\nr1\n\nr2\n</think>\n\ncontent  with  spaces \n", plain},
      {"  \n<think>x</think>y", plain},
      {"Plain answer, no tags at all.\n", plain},
      {"a <tool_call>\nbroken\n</tool_call> b <tool_call>\n<function=get_weather>\n</function>\n</tool_call>",
       plain},
      {"<think>\nunterminated reasoning <tool_ca", plain},
      {"reasoning</think>content<tool_call>\n<function=get_weather>\n<parameter=days>\n2\n</parameter>\n</"
       "function>",
       Thinking()},
      {"<thinking is not a tag> <think", plain},
      {"x<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"a\\\"}b\", \"n\": [1, {\"k\": "
       "2}]}}\n</tool_call>\n<tool_call>{\"name\":\"f\",\"arguments\":\"{}\"}</tool_call>y",
       plain},
      {"<tool_call>\n<function=get_weather>\n<parameter=city>\na < b\n\n</parameter>\n<parameter=zip>\n</par"
       "x\n</parameter>\n</function>\n</tool_call>",
       plain},
      {"<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": \"unterminated", plain},
      {kToolCallOutput, Legacy(Thinking())},
      {"<think>\nr1\n\nr2\n</think>\n\ncontent  with  spaces \n", Legacy(plain)},
      {"<think>\nunterminated reasoning <tool_ca", Legacy(plain)},
  };
  for (const auto& s : samples) ExpectStreamingMatchesOneShot(s.text, s.opt);
}

// --- The hybrid families' formats, each selected from its published template (tests/data/chat). ---

ToolCallFormat FormatOfTemplate(const std::string& name) {
  auto src = ReadFileToString(std::string(REWIND_TEST_DATA) + "/chat/" + name);
  EXPECT_TRUE(src.ok()) << name;
  return DetectToolCallFormat(src.ok() ? *src : "");
}

ParserOptions NemotronV2(bool thinking) {
  ParserOptions o;
  o.format = ToolCallFormat::kNemotronArray;
  o.starts_in_reasoning = thinking;
  o.tools = WeatherTools();
  return o;
}

const char* kNemotronV2Output =
    "The user wants two cities.\n</think>\n\nChecking both.\n<TOOLCALL>[{\"name\": \"get_weather\", "
    "\"arguments\": {\"city\": \"Oslo\", \"days\": 2}}, {\"name\": \"get_weather\", \"arguments\": "
    "{\"city\": "
    "\"Rome\", \"tags\": [\"a\", {\"k\": \"]}\"}]}}]</TOOLCALL>";

TEST(ToolCallFormats, EachFamilyTemplateSelectsItsFormat) {
  EXPECT_EQ(FormatOfTemplate("nemotron-nano-v2.jinja"), ToolCallFormat::kNemotronArray);
  EXPECT_EQ(FormatOfTemplate("nemotron-3-nano.jinja"), ToolCallFormat::kQwenXml);
  EXPECT_EQ(FormatOfTemplate("granite-4.0.jinja"), ToolCallFormat::kHermesJson);
  EXPECT_EQ(FormatOfTemplate("qwen3.5.jinja"), ToolCallFormat::kQwenXml);
  EXPECT_EQ(FormatOfTemplate("qwen3.jinja"), ToolCallFormat::kHermesJson);
  EXPECT_EQ(FormatOfTemplate("lfm2-8b-a1b.jinja"), ToolCallFormat::kLfm2Pythonic);
  EXPECT_EQ(FormatOfTemplate("kimi-k2.jinja"), ToolCallFormat::kKimi);
}

TEST(ToolCallFormats, ParsesNemotronNanoV2ToolCallArraysAsParallelCalls) {
  ParsedMessage m = ParseOutput(kNemotronV2Output, NemotronV2(true));
  EXPECT_EQ(m.reasoning_content, "The user wants two cities.");
  ExpectTwoWeatherCalls(m, R"({"city": "Oslo", "days": 2})",
                        R"({"city": "Rome", "tags": ["a", {"k": "]}"}]})");
  // Thinking off: the prompt closed the block ("<think></think>"); text after the calls is content.
  ParsedMessage off = ParseOutput("<TOOLCALL>[{\"name\": \"ping\"}]</TOOLCALL> done", NemotronV2(false));
  ASSERT_EQ(off.tool_calls.size(), 1u);
  EXPECT_EQ(off.tool_calls[0].arguments, "{}");
  EXPECT_EQ(off.content, "done");  // leading whitespace after a call is dropped, as after </think>
  // In this format <tool_call> is just text.
  ParsedMessage other = ParseOutput("<tool_call>\n{\"name\": \"f\"}\n</tool_call>", NemotronV2(false));
  EXPECT_TRUE(other.tool_calls.empty());
}

TEST(ToolCallFormats, NemotronArraysAreLenientAboutBracketsAndEndsButNeverInventCalls) {
  ParsedMessage lone =
      ParseOutput("<TOOLCALL>{\"name\": \"f\", \"arguments\": {\"a\": 1}}</TOOLCALL>", NemotronV2(false));
  ASSERT_EQ(lone.tool_calls.size(), 1u);
  EXPECT_EQ(lone.tool_calls[0].arguments, R"({"a": 1})");
  ParsedMessage cut =
      ParseOutput("<TOOLCALL>[{\"name\": \"f\", \"arguments\": {\"a\": \"x", NemotronV2(false));
  ASSERT_EQ(cut.tool_calls.size(), 1u);
  EXPECT_EQ(cut.tool_calls[0].arguments, R"({"a": "x"})");
  ExpectMalformedStaysContent({"see <TOOLCALL>not json</TOOLCALL> here", "<TOOLCALL>[]</TOOLCALL>",
                       "<TOOLCALL>[{\"arguments\": {}}]</TOOLCALL>", "<TOOLCALL>[\"f\"]</TOOLCALL>"},
                              NemotronV2(false), "<TOOLCALL>");
  // A broken second element ends the block after the first call; its text is content, not lost.
  ParsedMessage half = ParseOutput("<TOOLCALL>[{\"name\": \"f\"}, oops]</TOOLCALL>", NemotronV2(false));
  ASSERT_EQ(half.tool_calls.size(), 1u);
  EXPECT_NE(half.content.find("oops"), std::string::npos);
}

TEST(ToolCallFormats, NemotronArraysStreamArgumentsAsTheyAreWritten) {
  OutputParser p(NemotronV2(false));
  ParserDelta d1 = p.Feed("<TOOLCALL>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Os");
  ASSERT_EQ(d1.tool_calls.size(), 1u);
  EXPECT_EQ(d1.tool_calls[0].index, 0u);
  EXPECT_EQ(d1.tool_calls[0].name, "get_weather");
  EXPECT_EQ(d1.tool_calls[0].arguments, R"({"city": "Os)");
  ParserDelta d2 = p.Feed("lo\"}}, {\"name\": \"get_weather\", \"arguments\": {\"ci");
  ASSERT_EQ(d2.tool_calls.size(), 2u);
  EXPECT_EQ(d2.tool_calls[0].arguments, R"(lo"})");
  EXPECT_EQ(d2.tool_calls[1].index, 1u);
  EXPECT_EQ(d2.tool_calls[1].name, "get_weather");
  EXPECT_EQ(d2.tool_calls[1].arguments, R"({"ci)");
  ParserDelta d3 = p.Feed("ty\": \"Rome\"}}]</TOOL");
  EXPECT_EQ(d3.tool_calls.at(0).arguments, R"(ty": "Rome"})");
  EXPECT_TRUE(d3.content.empty());
  ParserDelta d4 = p.Feed("CALL>");
  EXPECT_TRUE(d4.empty());
  EXPECT_TRUE(p.Finish().empty());
  EXPECT_EQ(p.message().tool_calls.size(), 2u);
}

// Output parsed with the format `tmpl` selects (the server's TemplateChat does the same).
ParsedMessage ParseFor(const std::string& tmpl, const std::string& text, bool thinking) {
  ParserOptions o;
  o.format = FormatOfTemplate(tmpl);
  o.starts_in_reasoning = thinking;
  o.tools = WeatherTools();
  return ParseOutput(text, o);
}

// Nemotron 3 Nano writes Qwen3-Coder XML after its reasoning; Granite 4.0 Hermes JSON without reasoning.
TEST(ToolCallFormats, NemotronThreeAndGraniteOutputsParseWithTheirTemplatesFormats) {
  ParsedMessage a = ParseFor(
      "nemotron-3-nano.jinja",
      "Need weather.\n</think>\n<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n"
      "<parameter=days>\n2\n</parameter>\n</function>\n</tool_call>\n",
      true);
  EXPECT_EQ(a.reasoning_content, "Need weather.");
  ASSERT_EQ(a.tool_calls.size(), 1u);
  EXPECT_EQ(a.tool_calls[0].arguments, R"({"city":"Oslo","days":2})");
  ParsedMessage b = ParseFor(
      "granite-4.0.jinja",
      "Sure.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>",
      false);
  EXPECT_EQ(b.content, "Sure.");
  ASSERT_EQ(b.tool_calls.size(), 2u);
  EXPECT_EQ(b.tool_calls[1].arguments, R"({"city": "Rome"})");
}

TEST(ToolCallFormats, NemotronArrayStreamingSplitAtEveryByteMatchesOneShot) {
  const std::vector<std::pair<std::string, ParserOptions>> samples = {
      {kNemotronV2Output, NemotronV2(true)},
      {"a <TOOLCALL>broken</TOOLCALL> b <TOOLCALL>[{\"name\": \"f\"}]</TOOLCALL> c <TOOLCAL",
       NemotronV2(false)},
      {"<TOOLCALL>[{\"name\": \"f\", \"arguments\": \"{\\\"x\\\": 1}\"}, {\"name\": \"g\"} ]\n</TOOLCALL>\n",
       NemotronV2(false)},
      {"<TOOLCALL> [ {\"name\": \"f\", \"arguments\": {\"a\": [1, \"un", NemotronV2(false)},
      {"<TOOLCALL>[{\"name\": \"f\"}, oops]</TOOLCALL>", NemotronV2(false)},
  };
  for (const auto& [text, opt] : samples) ExpectStreamingMatchesOneShot(text, opt);
}

// --- LFM2: Python-style calls between <|tool_call_start|> and <|tool_call_end|>. ---

ParserOptions Lfm2() {
  ParserOptions o;
  o.format = ToolCallFormat::kLfm2Pythonic;
  o.tools = WeatherTools();
  return o;
}

const char* kLfm2Output =
    "Checking both.<|tool_call_start|>[get_weather(city=\"Oslo\", days=2), get_weather(city='Rome', "
    "tags=['a', {'k': ']}', \"n\": (1, -2.5e3)}], ok=True, none=None, esc=\"q\\\"\\u00e9\\n\")]"
    "<|tool_call_end|>";

TEST(ToolCallFormats, ParsesLfm2PythonStyleCallsAsParallelCalls) {
  ParsedMessage m = ParseOutput(kLfm2Output, Lfm2());
  ExpectTwoWeatherCalls(m, R"({"city":"Oslo","days":2})",
                        "{\"city\":\"Rome\",\"tags\":[\"a\",{\"k\":\"]}\",\"n\":[1,-2500.0]}],\"ok\":true,"
                        "\"none\":null,\"esc\":\"q\\\"\u00e9\\n\"}");
  // JSON spellings, no arguments, a lone call without brackets, text after the block.
  ParsedMessage j = ParseOutput("<|tool_call_start|>[ping(), f(a=true, b=null)]<|tool_call_end|> done", Lfm2());
  ASSERT_EQ(j.tool_calls.size(), 2u);
  EXPECT_EQ(j.tool_calls[0].arguments, "{}");
  EXPECT_EQ(j.tool_calls[1].arguments, R"({"a":true,"b":null})");
  EXPECT_EQ(j.content, "done");
  ParsedMessage lone = ParseOutput("<|tool_call_start|>f(a=1,)<|tool_call_end|>", Lfm2());
  ASSERT_EQ(lone.tool_calls.size(), 1u);
  EXPECT_EQ(lone.tool_calls[0].arguments, R"({"a":1})");
  // In this format <tool_call> is just text.
  EXPECT_TRUE(ParseOutput("<tool_call>\n{\"name\": \"f\"}\n</tool_call>", Lfm2()).tool_calls.empty());
}

TEST(ToolCallFormats, Lfm2CallsAreLenientAboutEndsButNeverInventCalls) {
  ParsedMessage cut = ParseOutput("<|tool_call_start|>[f(a=1, b=\"unfinish", Lfm2());
  ASSERT_EQ(cut.tool_calls.size(), 1u);
  EXPECT_EQ(cut.tool_calls[0].arguments, R"({"a":1})");  // an incomplete value is left out
  ParsedMessage no_paren = ParseOutput("<|tool_call_start|>[f(a=1]<|tool_call_end|>", Lfm2());
  ASSERT_EQ(no_paren.tool_calls.size(), 1u);
  EXPECT_TRUE(no_paren.content.empty());
  ExpectMalformedStaysContent({"see <|tool_call_start|>not a call<|tool_call_end|> here",
                       "<|tool_call_start|>[]<|tool_call_end|>", "<|tool_call_start|>[\"f\"]<|tool_call_end|>",
                       "<|tool_call_start|>[42(a=1)]<|tool_call_end|>"},
                              Lfm2(), "<|tool_call_start|>");
  // A broken argument ends the call and the block; the rest is content, not lost.
  ParsedMessage half = ParseOutput("<|tool_call_start|>[f(a=1, b=oops)]<|tool_call_end|>", Lfm2());
  ASSERT_EQ(half.tool_calls.size(), 1u);
  EXPECT_EQ(half.tool_calls[0].arguments, R"({"a":1})");
  EXPECT_NE(half.content.find("oops"), std::string::npos);
}

TEST(ToolCallFormats, Lfm2CallsStreamTheNameFirstThenEachArgument) {
  OutputParser p(Lfm2());
  ParserDelta d1 = p.Feed("Sure.<|tool_call_start|>[get_weather(ci");
  EXPECT_EQ(d1.content, "Sure.");
  ASSERT_EQ(d1.tool_calls.size(), 1u);
  EXPECT_EQ(d1.tool_calls[0].name, "get_weather");
  EXPECT_EQ(d1.tool_calls[0].arguments, "");
  ParserDelta d2 = p.Feed("ty=\"Os");
  EXPECT_TRUE(d2.empty());
  ParserDelta d3 = p.Feed("lo\", days=3), get_weather(city=\"Rome\")]<|tool_");
  ASSERT_EQ(d3.tool_calls.size(), 6u);
  EXPECT_EQ(d3.tool_calls[0].arguments, R"({"city":"Oslo")");
  EXPECT_EQ(d3.tool_calls[1].arguments, R"(,"days":3)");
  EXPECT_EQ(d3.tool_calls[2].arguments, "}");
  EXPECT_EQ(d3.tool_calls[3].index, 1u);
  EXPECT_EQ(d3.tool_calls[3].name, "get_weather");
  EXPECT_EQ(d3.tool_calls[4].arguments, R"({"city":"Rome")");
  EXPECT_EQ(d3.tool_calls[5].arguments, "}");
  EXPECT_TRUE(p.Feed("call_end|>").empty());
  EXPECT_TRUE(p.Finish().empty());
  EXPECT_EQ(p.message().tool_calls.size(), 2u);
}

TEST(ToolCallFormats, Lfm2StreamingSplitAtEveryByteMatchesOneShot) {
  const std::vector<std::string> samples = {
      kLfm2Output,
      "a <|tool_call_start|>broken<|tool_call_end|> b <|tool_call_start|>[f()]<|tool_call_end|> c <|tool_ca",
      "<|tool_call_start|> [ f(a = [1, \"un",
      "<|tool_call_start|>[f(a=1, b=oops)]<|tool_call_end|>",
      "<|tool_call_start|>[f(a=1), g(s='\\ud83d\\ude00', t=1.)]\n<|tool_call_end|>\n",
  };
  for (const auto& text : samples) ExpectStreamingMatchesOneShot(text, Lfm2());
}

}  // namespace
}  // namespace rw::chat
