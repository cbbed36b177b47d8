#include "grammar/matcher.h"

#include <gtest/gtest.h>

#include <random>

namespace rw::grammar {
namespace {

std::shared_ptr<const Grammar> Parse(const std::string& text) {
  auto g = ParseGbnf(text);
  EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.error().message);
  return *g;
}

TEST(Matcher, TracksCompletionAndRejectsWithoutChangingState) {
  Matcher m(Parse(R"(root ::= "ab" | "abc")"));
  EXPECT_FALSE(m.CanEnd());
  EXPECT_FALSE(m.Advance("x"));
  EXPECT_TRUE(m.Advance("ab"));
  EXPECT_TRUE(m.CanEnd());
  EXPECT_FALSE(m.MustEnd());
  EXPECT_TRUE(m.Accepts("c"));
  EXPECT_FALSE(m.Accepts("d"));
  EXPECT_TRUE(m.Advance("c"));
  EXPECT_TRUE(m.MustEnd());
}

TEST(Matcher, SplitsMultiByteCharactersAcrossTokens) {
  Matcher m(Parse(R"(root ::= "é" [0-9])"));
  EXPECT_TRUE(m.Accepts("\xC3"));
  EXPECT_FALSE(m.Accepts("\xC4"));  // no allowed character starts with this byte
  EXPECT_TRUE(m.Advance("\xC3"));
  EXPECT_FALSE(m.CanEnd());
  EXPECT_TRUE(
      m.Advance("\xA9"
                "7"));
  EXPECT_TRUE(m.CanEnd());
}

TEST(Matcher, RejectsOverLongAndSurrogateEncodings) {
  Matcher m(Parse(R"(root ::= "{" | [\x80-\U0010FFFF])"));
  EXPECT_FALSE(m.Accepts("\xC1"));  // would be an over-long form of "{"
  EXPECT_FALSE(m.Accepts("\xC1\xBB"));
  EXPECT_FALSE(m.Accepts("\xE0\x80"));      // over-long 3-byte prefix
  EXPECT_FALSE(m.Accepts("\xED\xA0\x80"));  // a UTF-16 surrogate
  EXPECT_TRUE(m.Accepts("\xC2\x80"));
}

// The trie walk must allow exactly the tokens a one-by-one check allows, in every state along a random walk.
TEST(Matcher, TrieMaskEqualsPerTokenCheck) {
  std::vector<std::string> pieces = {"",         "{",    "}",  "\"", "a", "ab",    "abc",  "b",
                                     "\":",      ": ",   "1",  "12", "x", " ",     "\xC3", "\xA9",
                                     "\xC3\xA9", "null", "nu", "ll", ",", "\"a\"", "[",    "]"};
  std::mt19937 rng(5);
  for (int i = 0; i < 300; ++i)
    pieces.push_back(std::string(1, "ab{}\":, 1n[]"[rng() % 12]) + "ab\"}"[rng() % 4]);
  TokenTrie trie(pieces);
  auto g = Parse(R"(root ::= "{" ( str ":" " "? val ( "," str ":" val )* )? "}"
str ::= "\"" [a-zé]* "\""
val ::= str | [0-9]+ | "null" | "[" ( val ( "," val )* )? "]")");
  Matcher m(g);
  for (int step = 0; step < 40; ++step) {
    std::vector<int32_t> ids;
    m.AllowedTokens(trie, &ids);
    std::vector<uint8_t> mask(pieces.size(), 0);
    for (int32_t id : ids) mask[id] = 1;
    std::vector<int> ok;
    for (size_t t = 0; t < pieces.size(); ++t) {
      bool expect = !pieces[t].empty() && m.Accepts(pieces[t]);
      ASSERT_EQ(mask[t] != 0, expect) << "step " << step << " token '" << pieces[t] << "'";
      if (expect) ok.push_back(static_cast<int>(t));
    }
    if (ok.empty()) break;
    ASSERT_TRUE(m.Advance(pieces[ok[rng() % ok.size()]]));
  }
}

}  // namespace
}  // namespace rw::grammar
