#include <gtest/gtest.h>

#include "grammar/grammar.h"
#include "grammar/matcher.h"

namespace rw::grammar {
namespace {

bool Full(const std::string& gbnf, const std::string& text) {
  auto g = ParseGbnf(gbnf);
  EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.error().message);
  if (!g.ok()) return false;
  Matcher m(*g);
  return m.Advance(text) && m.CanEnd();
}

TEST(Gbnf, LiteralsClassesAndAlternatives) {
  const std::string g = R"(root ::= "a" [b-d] | "x" [^a-z] # comment
)";
  EXPECT_TRUE(Full(g, "ab"));
  EXPECT_TRUE(Full(g, "ad"));
  EXPECT_FALSE(Full(g, "ae"));
  EXPECT_TRUE(Full(g, "x1"));
  EXPECT_FALSE(Full(g, "xq"));
  EXPECT_FALSE(Full(g, "a"));
}

TEST(Gbnf, AlternativesMayContinueOnTheNextLine) {
  const std::string g = "root ::= a\n  | b\na ::= \"A\"\nb ::= \"B\"\n";
  EXPECT_TRUE(Full(g, "A"));
  EXPECT_TRUE(Full(g, "B"));
}

TEST(Gbnf, RepetitionOperators) {
  EXPECT_TRUE(Full(R"(root ::= "a"* "b")", "b"));
  EXPECT_TRUE(Full(R"(root ::= "a"* "b")", "aaab"));
  EXPECT_FALSE(Full(R"(root ::= "a"+ "b")", "b"));
  EXPECT_TRUE(Full(R"(root ::= "a"? "b")", "ab"));
  EXPECT_FALSE(Full(R"(root ::= "a"? "b")", "aab"));
  EXPECT_TRUE(Full(R"(root ::= [0-9]{2,3})", "12"));
  EXPECT_TRUE(Full(R"(root ::= [0-9]{2,3})", "123"));
  EXPECT_FALSE(Full(R"(root ::= [0-9]{2,3})", "1"));
  EXPECT_FALSE(Full(R"(root ::= [0-9]{2,3})", "1234"));
  EXPECT_TRUE(Full(R"(root ::= ("ab" | "c"){2,})", "abcab"));
  EXPECT_FALSE(Full(R"(root ::= ("ab" | "c"){2,})", "ab"));
  EXPECT_TRUE(Full(R"(root ::= "x"{3})", "xxx"));
}

TEST(Gbnf, EscapesAndUnicode) {
  EXPECT_TRUE(Full(R"(root ::= "\n\t\x41\u00e9")", "\n\tA\xC3\xA9"));
  EXPECT_TRUE(Full(R"(root ::= [α-ω]+)", "\xCE\xB1\xCE\xB2"));
  EXPECT_TRUE(Full(R"(root ::= .+)", "\xF0\x9F\x98\x80 x"));
}

TEST(Gbnf, ErrorsNameTheProblem) {
  auto undefined = ParseGbnf("root ::= foo\n");
  ASSERT_FALSE(undefined.ok());
  EXPECT_NE(undefined.error().message.find("undefined rule 'foo'"), std::string::npos);
  auto left = ParseGbnf("root ::= root \"a\" | \"b\"\n");
  ASSERT_FALSE(left.ok());
  EXPECT_NE(left.error().message.find("left-recursive"), std::string::npos);
  EXPECT_FALSE(ParseGbnf("root ::= \"abc\n").ok());
  EXPECT_FALSE(ParseGbnf("root ::= [a-\n").ok());
  EXPECT_FALSE(ParseGbnf("other ::= \"a\"\n").ok());
  EXPECT_FALSE(ParseGbnf("root ::= \"a\"{3,2}\n").ok());
  EXPECT_FALSE(ParseGbnf("root ::= *\n").ok());
}

TEST(GbnfLimits, RepetitionsAreChargedBeforeTheyAreCopied) {
  GbnfLimits l;
  l.max_elements = 10000;
  // 1,000 characters x 100 copies = 100,000 elements: refused without being built.
  auto g = ParseGbnf("root ::= \"" + std::string(1000, 'a') + "\"{100}", "root", l);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.error().kind, ErrorKind::kOutOfRange);
  EXPECT_NE(g.error().message.find("10000 elements"), std::string::npos) << g.error().message;
  EXPECT_TRUE(ParseGbnf("root ::= \"" + std::string(10, 'a') + "\"{100}", "root", l).ok());
}

TEST(GbnfLimits, RulesFromBoundedRepetitionsCount) {
  GbnfLimits l;
  l.max_rules = 100;
  auto g = ParseGbnf(R"(root ::= "a"{0,1000})", "root", l);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.error().kind, ErrorKind::kOutOfRange);
  EXPECT_TRUE(ParseGbnf(R"(root ::= "a"{0,50})", "root", l).ok());
}

TEST(GbnfLimits, DeeplyNestedGroupsAreAnErrorNotAStackOverflow) {
  auto g = ParseGbnf("root ::= " + std::string(100000, '(') + "\"a\"" + std::string(100000, ')'));
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.error().message.find("nested deeper"), std::string::npos) << g.error().message;
}

TEST(GbnfLimits, ALongChainOfRulesIsCheckedForLeftRecursionWithoutRecursing) {
  std::string text = "root ::= r0\n";
  const int n = 60000;
  for (int i = 0; i < n; ++i) text += "r" + std::to_string(i) + " ::= r" + std::to_string(i + 1) + " \"x\"\n";
  text += "r" + std::to_string(n) + " ::= \"y\"\n";
  EXPECT_TRUE(ParseGbnf(text).ok());
  text += "r" + std::to_string(n + 1) + " ::= r" + std::to_string(n + 1) + " \"z\"\n";  // left-recursive
  auto bad = ParseGbnf(text);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("left-recursive"), std::string::npos);
}

}  // namespace
}  // namespace rw::grammar
