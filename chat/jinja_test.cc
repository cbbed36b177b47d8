// The Jinja engine, construct by construct. Expected outputs in tests/data/chat/jinja_cases.json come from
// Python's jinja2 with Hugging Face's settings (make_jinja_cases.py); the rest checks rewind's own choices.
#include "chat/jinja.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "base/file.h"
#include "chat/jinja_value.h"

namespace rw::chat {
namespace {

using Json = nlohmann::ordered_json;

struct Case {
  std::string name;
  Json data;
};

std::vector<Case> LoadCases() {
  std::vector<Case> out;
  auto text = ReadFileToString(std::string(REWIND_TEST_DATA) + "/chat/jinja_cases.json");
  if (!text.ok()) return out;
  for (auto& c : Json::parse(*text)) out.push_back({c["name"].get<std::string>(), c});
  return out;
}

std::string RenderOk(const std::string& src, const Json& ctx = Json::object()) {
  auto t = Template::Parse(src);
  EXPECT_TRUE(t.ok()) << (t.ok() ? "" : t.error().message);
  if (!t.ok()) return "<parse error>";
  auto r = t->Render(ctx);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? *r : "<render error>";
}

std::string RenderError(const std::string& src, const Json& ctx = Json::object()) {
  auto t = Template::Parse(src);
  if (!t.ok()) return t.error().message;
  auto r = t->Render(ctx);
  EXPECT_FALSE(r.ok()) << "rendered: " << *r;
  return r.ok() ? "" : r.error().message;
}

class JinjaMatchesPython : public ::testing::TestWithParam<Case> {};

TEST_P(JinjaMatchesPython, RendersLikeJinja2) {
  const Json& c = GetParam().data;
  auto t = Template::Parse(c["template"].get<std::string>());
  ASSERT_TRUE(t.ok()) << t.error().message;
  auto r = t->Render(c["context"]);
  if (c.contains("error")) {
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().message, c["error"].get<std::string>());
  } else {
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(*r, c["expected"].get<std::string>());
  }
}

INSTANTIATE_TEST_SUITE_P(Constructs, JinjaMatchesPython, ::testing::ValuesIn(LoadCases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

TEST(Jinja, CaseFileIsPresentAndCoversTheConstructs) { EXPECT_GE(LoadCases().size(), 50u); }

TEST(Jinja, MissingAttributesAreUndefinedNotErrors) {
  EXPECT_EQ(RenderOk("[{{ m.nope }}][{{ m.nope.deeper }}][{{ m.nope is defined }}][{{ x.y.z is undefined }}]",
                     {{"m", {{"a", 1}}}}),
            "[][][False][True]");
}

TEST(Jinja, CallingAMethodOnUndefinedIsAnErrorNamingIt) {
  std::string e = RenderError("line one\n{{ missing.strip() }}");
  EXPECT_NE(e.find("strip"), std::string::npos) << e;
  EXPECT_NE(e.find("missing"), std::string::npos) << e;
  EXPECT_NE(e.find("line 2"), std::string::npos) << e;
}

TEST(Jinja, RuntimeErrorsCarryTheTemplateLine) {
  std::string e = RenderError("a\nb\n{% if true %}\n{{ 1 + 'x' }}\n{% endif %}");
  EXPECT_EQ(e.rfind("template line 4:", 0), 0u) << e;
}

TEST(Jinja, SyntaxErrorsCarryTheTemplateLine) {
  EXPECT_EQ(RenderError("ok\n{% for x in y %}\nno end").rfind("template line", 0), 0u);
  std::string e = RenderError("one\ntwo {{ 1 + }}");
  EXPECT_EQ(e.rfind("template line 2:", 0), 0u) << e;
  EXPECT_EQ(RenderError("{% frobnicate %}").rfind("template line 1: unknown statement", 0), 0u);
}

TEST(Jinja, RaiseExceptionGivesExactlyTheTemplatesMessage) {
  EXPECT_EQ(RenderError("x\n{{ raise_exception('No messages provided.') }}"), "No messages provided.");
}

TEST(Jinja, AnAttributeOfAnIndexPastTheEndRaisesLikeJinja2) {
  // jinja2: UndefinedError "list object has no element 0" (a template reading messages[0].role on []).
  Json empty = {{"messages", Json::array()}};
  std::string e = RenderError("{% if messages[0].role == 'system' %}s{% endif %}", empty);
  EXPECT_NE(e.find("list object has no element 0"), std::string::npos) << e;
  e = RenderError("{{ messages[-1]['content'] }}", empty);
  EXPECT_NE(e.find("list object has no element -1"), std::string::npos) << e;
  e = RenderError("{{ 'ab'[5].x }}");
  EXPECT_NE(e.find("str object has no element 5"), std::string::npos) << e;
  // Testing, printing or defaulting the missing element itself is no error, as in jinja2.
  EXPECT_EQ(RenderOk("[{{ messages[0] is defined }}][{{ messages[0] }}][{{ messages[0] | default('d') }}]", empty),
            "[False][][d]");
}

TEST(Jinja, MalformedTemplatesAreErrorsNotCrashes) {
  const char* bad[] = {"{{",
                       "{%",
                       "{#",
                       "{{ 'unterminated }}",
                       "{% if %}",
                       "{% for %}{% endfor %}",
                       "{{ a[ }}",
                       "{{ (1, }}",
                       "{% endif %}",
                       "{{ } }}",
                       "{% set %}",
                       "{{ 1 | }}",
                       "{% macro %}{% endmacro %}",
                       "{{ x is }}",
                       "{% raw %}no end",
                       "{{ '\\x4' }}",
                       "{{ 99999999999999999999 }}"};
  for (const char* src : bad) {
    auto t = Template::Parse(src);
    if (t.ok()) {
      auto r = t->Render(Json::object());
      EXPECT_FALSE(r.ok()) << src;
    }
  }
}

TEST(Jinja, RuntimeTypeErrorsAreErrorsNotCrashes) {
  const char* bad[] = {"{{ 1 / 0 }}",
                       "{{ 1 // 0 }}",
                       "{{ 5 % 0 }}",
                       "{{ none + 1 }}",
                       "{{ [] - 1 }}",
                       "{{ 'a' < 1 }}",
                       "{% for x in 5 %}{% endfor %}",
                       "{{ 'x'.nomethod() }}",
                       "{{ 3() }}",
                       "{{ [1][::0] }}",
                       "{{ range(1, 2, 0) }}",
                       "{% set a, b = [1] %}",
                       "{{ 'x'|nofilter }}",
                       "{{ 1 is notatest }}",
                       "{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}"};
  for (const char* src : bad) EXPECT_FALSE(RenderError(src).empty()) << src;
}

TEST(Jinja, FloatsPrintLikePython) {
  using jinja::FormatFloat;
  EXPECT_EQ(FormatFloat(1.0), "1.0");
  EXPECT_EQ(FormatFloat(0.1), "0.1");
  EXPECT_EQ(FormatFloat(-2.5), "-2.5");
  EXPECT_EQ(FormatFloat(1e16), "1e+16");
  EXPECT_EQ(FormatFloat(123456789012345.0), "123456789012345.0");
  EXPECT_EQ(FormatFloat(1.5e-5), "1.5e-05");
  EXPECT_EQ(FormatFloat(0.0001), "0.0001");
  EXPECT_EQ(FormatFloat(1.0 / 3), "0.3333333333333333");
}

TEST(Jinja, TojsonKeepsKeyOrderAndRawUnicode) {
  Json ctx = Json::parse(R"({"d": {"z": "ü\u0001", "a": [1, 2.0, true, null]}})");
  EXPECT_EQ(RenderOk("{{ d|tojson }}", ctx), "{\"z\": \"ü\\u0001\", \"a\": [1, 2.0, true, null]}");
}

TEST(Jinja, StrftimeNowFormatsTheCurrentTime) {
  std::string year = RenderOk("{{ strftime_now('%Y') }}");
  ASSERT_EQ(year.size(), 4u);
  EXPECT_GE(std::stoi(year), 2024);
}

TEST(Jinja, TemplateIsReusableAcrossRenders) {
  auto t = Template::Parse(
      "{% set ns = namespace(n=0) %}{% for m in xs %}{% set ns.n = ns.n + m %}{% endfor %}{{ ns.n }}");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t->Render(Json{{"xs", {1, 2}}}), "3");
  EXPECT_EQ(*t->Render(Json{{"xs", {5}}}), "5");
}

TEST(Jinja, ContextMustBeAnObject) {
  auto t = Template::Parse("x");
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE(t->Render(Json::array()).ok());
}

}  // namespace
}  // namespace rw::chat
