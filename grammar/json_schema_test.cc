#include "grammar/json_schema.h"

#include <gtest/gtest.h>

#include <random>

#include "grammar/matcher.h"
#include "grammar/tool_grammar.h"

namespace rw::grammar {
namespace {

using json = nlohmann::ordered_json;

std::shared_ptr<const Grammar> Compile(const json& schema) {
  auto text = JsonSchemaToGbnf(schema);
  EXPECT_TRUE(text.ok()) << (text.ok() ? "" : text.error().message);
  if (!text.ok()) return nullptr;
  auto g = ParseGbnf(*text);
  EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.error().message) << "\n" << *text;
  return g.ok() ? *g : nullptr;
}

bool Matches(const std::shared_ptr<const Grammar>& g, const std::string& text) {
  Matcher m(g);
  return m.Advance(text) && m.CanEnd();
}

// A random sentence of the grammar: random allowed characters, preferring to stop once the text is complete.
std::string RandomSentence(const std::shared_ptr<const Grammar>& g, std::mt19937* rng) {
  static const std::string alphabet = "{}[]\":,-.0123456789eE+ abcdefghijklmnopqrstuvwxyzT\\n\nZ";
  Matcher m(g);
  std::string out;
  for (int i = 0; i < 400; ++i) {
    if (m.CanEnd() && ((*rng)() % 3 == 0 || m.MustEnd())) return out;
    std::vector<char> ok;
    for (char c : alphabet)
      if (m.Accepts(std::string(1, c))) ok.push_back(c);
    if (ok.empty()) break;
    // Closing characters are favoured so that documents finish.
    char pick = ok[(*rng)() % ok.size()];
    for (char c : ok)
      if ((c == '}' || c == ']' || c == '"') && (*rng)() % 2) pick = c;
    m.Advance(std::string(1, pick));
    out += pick;
  }
  return m.CanEnd() ? out : std::string();
}

TEST(JsonSchema, ObjectsKeepRequiredPropertiesAndAllowOptionalOnes) {
  json s = {{"type", "object"},
            {"properties",
             {{"a", {{"type", "integer"}}}, {"b", {{"type", "string"}}}, {"c", {{"type", "boolean"}}}}},
            {"required", {"b"}}};
  auto g = Compile(s);
  ASSERT_TRUE(g);
  EXPECT_TRUE(Matches(g, R"({"b": "x"})"));
  EXPECT_TRUE(Matches(g, R"({"a": 1, "b": "x", "c": true})"));
  EXPECT_TRUE(Matches(g, R"({"b":"x","c":false})"));
  EXPECT_FALSE(Matches(g, R"({"a": 1})"));
  EXPECT_FALSE(Matches(g, R"({"b": 1})"));
  EXPECT_FALSE(Matches(g, R"({"b": "x", "d": 1})"));
}

TEST(JsonSchema, AllOptionalObjectMayBeEmpty) {
  auto g =
      Compile({{"type", "object"}, {"properties", {{"x", {{"type", "null"}}}, {"y", {{"type", "number"}}}}}});
  ASSERT_TRUE(g);
  EXPECT_TRUE(Matches(g, "{}"));
  EXPECT_TRUE(Matches(g, R"({"y": -1.5e3})"));
  EXPECT_TRUE(Matches(g, R"({"x": null, "y": 2})"));
  EXPECT_FALSE(Matches(g, R"({"y": 2, "x": null})"));  // schema order
}

TEST(JsonSchema, ArraysEnumsRefsAndIntegerBounds) {
  json s = {{"$defs", {{"item", {{"enum", {"red", 3, nullptr}}}}}},
            {"type", "array"},
            {"items", {{"$ref", "#/$defs/item"}}},
            {"minItems", 1},
            {"maxItems", 2}};
  auto g = Compile(s);
  ASSERT_TRUE(g);
  EXPECT_TRUE(Matches(g, R"(["red"])"));
  EXPECT_TRUE(Matches(g, R"([3, null])"));
  EXPECT_FALSE(Matches(g, "[]"));
  EXPECT_FALSE(Matches(g, R"([3, 3, 3])"));
  EXPECT_FALSE(Matches(g, R"(["blue"])"));
  auto r = Compile({{"type", "integer"}, {"minimum", -12}, {"exclusiveMaximum", 305}});
  ASSERT_TRUE(r);
  for (int v = -30; v < 330; ++v) EXPECT_EQ(Matches(r, std::to_string(v)), v >= -12 && v < 305) << v;
  EXPECT_FALSE(Matches(r, "007"));
}

TEST(JsonSchema, StringLengthsAndFormats) {
  auto g = Compile({{"type", "string"}, {"minLength", 2}, {"maxLength", 3}});
  ASSERT_TRUE(g);
  EXPECT_FALSE(Matches(g, R"("a")"));
  EXPECT_TRUE(Matches(g, R"("ab")"));
  EXPECT_TRUE(Matches(g, R"("a\n")"));
  EXPECT_FALSE(Matches(g, R"("abcd")"));
  auto d = Compile({{"type", "string"}, {"format", "date"}});
  ASSERT_TRUE(d);
  EXPECT_TRUE(Matches(d, R"("2024-02-29")"));
  EXPECT_FALSE(Matches(d, R"("2024-13-01")"));
}

TEST(JsonSchema, UnsupportedFeaturesAreErrorsNamingThem) {
  for (const auto& [schema, word] : std::vector<std::pair<json, std::string>>{
           {{{"type", "string"}, {"pattern", "^a+$"}}, "pattern"},
           {{{"type", "array"}, {"uniqueItems", true}}, "uniqueItems"},
           {{{"allOf", json::array({json::object()})}}, "allOf"},
           {{{"type", "string"}, {"format", "email"}}, "email"},
           {{{"$ref", "http://x/y"}}, "$ref"},
       }) {
    auto r = JsonSchemaToGbnf(schema);
    ASSERT_FALSE(r.ok()) << schema.dump();
    EXPECT_NE(r.error().message.find(word), std::string::npos) << r.error().message;
  }
}

TEST(JsonSchema, RandomSentencesAreJsonWithTheRequiredKeys) {
  json s = {
      {"type", "object"},
      {"properties",
       {{"id", {{"type", "integer"}, {"minimum", 0}, {"maximum", 99}}},
        {"tags", {{"type", "array"}, {"items", {{"type", "string"}, {"maxLength", 4}}}}},
        {"kind", {{"enum", {"a", "b"}}}},
        {"sub", {{"type", "object"}, {"properties", {{"x", {{"type", "number"}}}}}, {"required", {"x"}}}}}},
      {"required", {"id", "sub"}}};
  auto g = Compile(s);
  ASSERT_TRUE(g);
  std::mt19937 rng(3);
  int checked = 0;
  for (int i = 0; i < 60; ++i) {
    std::string text = RandomSentence(g, &rng);
    if (text.empty()) continue;
    json v = json::parse(text, nullptr, false);
    ASSERT_FALSE(v.is_discarded()) << text;
    ASSERT_TRUE(v.contains("id") && v["id"].is_number_integer()) << text;
    EXPECT_LE(v["id"].get<int>(), 99);
    ASSERT_TRUE(v["sub"].contains("x")) << text;
    ++checked;
  }
  EXPECT_GT(checked, 10);
}

TEST(ToolGrammar, ForcedXmlCallMatchesTheParsedFormat) {
  json tools =
      json::parse(R"([{"type":"function","function":{"name":"get_weather","parameters":{"type":"object",
      "properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city"]}}}])");
  auto text = ToolCallGbnf(tools, {});
  ASSERT_TRUE(text.ok()) << text.error().message;
  auto g = ParseGbnf(*text);
  ASSERT_TRUE(g.ok()) << g.error().message << "\n" << *text;
  EXPECT_TRUE(Matches(*g,
                      "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
                      "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>"));
  EXPECT_FALSE(Matches(*g, "<tool_call>\n<function=get_weather>\n</function>\n</tool_call>"));
  EXPECT_FALSE(Matches(*g, "Sure! <tool_call>"));
  ToolGrammarOptions named;
  named.function = "nope";
  EXPECT_FALSE(ToolCallGbnf(tools, named).ok());
  ToolGrammarOptions hermes;
  hermes.format = ToolCallFormat::kHermesJson;
  hermes.thinking_open = true;
  auto h = ParseGbnf(*ToolCallGbnf(tools, hermes));
  ASSERT_TRUE(h.ok());
  EXPECT_TRUE(Matches(*h,
                      "Let me look.</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                      "{\"city\": \"Oslo\"}}\n</tool_call>"));
  ToolGrammarOptions nemotron;
  nemotron.format = ToolCallFormat::kNemotronArray;
  auto n = ParseGbnf(*ToolCallGbnf(tools, nemotron));
  ASSERT_TRUE(n.ok());
  EXPECT_TRUE(
      Matches(*n,
              "<TOOLCALL>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}, "
              "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\", \"days\": 2}}]</TOOLCALL>"));
  EXPECT_FALSE(Matches(*n, "<TOOLCALL>[]</TOOLCALL>"));
  ToolGrammarOptions kimi;
  kimi.format = ToolCallFormat::kKimi;
  auto k = ParseGbnf(*ToolCallGbnf(tools, kimi));
  ASSERT_TRUE(k.ok()) << k.error().message;
  EXPECT_TRUE(Matches(*k, "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
                          "<|tool_call_argument_begin|>{\"city\": \"Oslo\"}<|tool_call_end|><|tool_call_begin|>"
                          "functions.get_weather:1<|tool_call_argument_begin|>{\"city\": \"Rome\", \"days\": 2}"
                          "<|tool_call_end|><|tool_calls_section_end|>"));
  EXPECT_FALSE(Matches(*k, "<|tool_calls_section_begin|><|tool_calls_section_end|>"));
  EXPECT_FALSE(Matches(*k, "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
                           "<|tool_call_argument_begin|>{\"days\": 2}<|tool_call_end|><|tool_calls_section_end|>"));
  ToolGrammarOptions lfm2;
  lfm2.format = ToolCallFormat::kLfm2Pythonic;
  auto l = ParseGbnf(*ToolCallGbnf(tools, lfm2));
  ASSERT_TRUE(l.ok()) << l.error().message;
  EXPECT_TRUE(Matches(*l, "<|tool_call_start|>[get_weather(city=\"Oslo\"), get_weather(city=\"Rome\", days=2)]"
                          "<|tool_call_end|>"));
  EXPECT_FALSE(Matches(*l, "<|tool_call_start|>[get_weather(days=2)]<|tool_call_end|>"));  // city is required
  EXPECT_FALSE(Matches(*l, "<|tool_call_start|>[get_weather(city=Oslo)]<|tool_call_end|>"));
  // Optional parameters before and after a required one: ", " only between the ones written.
  json opt_tools = json::parse(R"([{"type":"function","function":{"name":"f","parameters":{"type":"object",
      "properties":{"a":{"type":"integer"},"b":{"type":"boolean"},"c":{"type":"string"}},"required":["b"]}}}])");
  auto o = ParseGbnf(*ToolCallGbnf(opt_tools, lfm2));
  ASSERT_TRUE(o.ok()) << o.error().message;
  for (const char* call : {"f(b=true)", "f(a=1, b=false)", "f(b=true, c=\"x\")", "f(a=-2, b=true, c=\"\")"})
    EXPECT_TRUE(Matches(*o, std::string("<|tool_call_start|>[") + call + "]<|tool_call_end|>")) << call;
  for (const char* call : {"f()", "f(a=1)", "f(, b=true)", "f(b=true, )", "f(b=true c=\"x\")"})
    EXPECT_FALSE(Matches(*o, std::string("<|tool_call_start|>[") + call + "]<|tool_call_end|>")) << call;
  nemotron.parallel = false;
  auto one = ParseGbnf(*ToolCallGbnf(tools, nemotron));
  ASSERT_TRUE(one.ok());
  EXPECT_FALSE(Matches(*one,
                       "<TOOLCALL>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}, "
                       "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}]</TOOLCALL>"));
}

}  // namespace
}  // namespace rw::grammar
