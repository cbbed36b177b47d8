// The memoized trie walk (AllowedMask / AllowedTokens) against the plain walk (AllowedTokensReference): the
// same allowed set in every state met along random walks, over random JSON schemas and grammars with
// multi-byte classes, with a vocabulary whose pieces split UTF-8 characters, with the memo large, tiny (so
// walks overflow it) and reused across many steps (cached masks).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "grammar/json_schema.h"
#include "grammar/matcher.h"

namespace rw::grammar {
namespace {

using Json = nlohmann::ordered_json;

// Pieces of 1..6 units, each unit an ASCII byte JSON uses, a whole UTF-8 character (some at validity edges:
// over-long and surrogate ranges nearby, the last code point) or a lone lead or continuation byte.
std::vector<std::string> RandomVocabulary(std::mt19937& rng, size_t n) {
  static const std::vector<std::string> kUnits = {"{",
                                                  "}",
                                                  "[",
                                                  "]",
                                                  "\"",
                                                  ":",
                                                  ",",
                                                  " ",
                                                  "\n",
                                                  "\t",
                                                  "\\",
                                                  "\\n",
                                                  "\\u00",
                                                  "a",
                                                  "b",
                                                  "e",
                                                  "l",
                                                  "n",
                                                  "r",
                                                  "s",
                                                  "t",
                                                  "u",
                                                  "f",
                                                  "0",
                                                  "1",
                                                  "9",
                                                  "-",
                                                  ".",
                                                  "E",
                                                  "+",
                                                  "x",
                                                  "Z",
                                                  "\x01",
                                                  "\x7F",
                                                  "é",
                                                  "ß",
                                                  "中",
                                                  "文",
                                                  "\xE0\xA0\x80",
                                                  "\xED\x9F\xBF",
                                                  "\xEE\x80\x80",
                                                  "\xF0\x90\x80\x80",
                                                  "\xF4\x8F\xBF\xBF",
                                                  "😀",
                                                  "\xC3",
                                                  "\xE4\xB8",
                                                  "\xF0\x9F",
                                                  "\x98",
                                                  "\xAD",
                                                  "\xBF",
                                                  "\x80",
                                                  "\xED",
                                                  "\xE0",
                                                  "\xF4",
                                                  "\xC0",
                                                  "\xFF"};
  std::vector<std::string> v = {""};  // a control token (empty text)
  for (const std::string& u : kUnits) v.push_back(u);
  while (v.size() < n) {
    std::string p;
    for (size_t len = 1 + rng() % 6, i = 0; i < len; ++i) p += kUnits[rng() % kUnits.size()];
    v.push_back(p);
  }
  return v;
}

Json RandomSchema(std::mt19937& rng, int depth) {
  switch (rng() % (depth > 2 ? 5 : 8)) {
    case 0:
      return {{"type", "string"}, {"maxLength", 1 + rng() % 12}};
    case 1:
      return {{"type", "string"}};
    case 2:
      return {{"type", "integer"}, {"minimum", -5}, {"maximum", 300}};
    case 3:
      return {{"enum", {"ab", "中文", "a\"b"}}};
    case 4:
      return {{"type", {"number", "boolean", "null"}}};
    case 5:
      return {{"type", "array"}, {"items", RandomSchema(rng, depth + 1)}, {"maxItems", 1 + rng() % 3}};
    case 6:
      return {{"anyOf", {RandomSchema(rng, depth + 1), RandomSchema(rng, depth + 1)}}};
    default: {
      Json props = Json::object();
      std::vector<std::string> required;
      for (size_t i = 0, n = 1 + rng() % 3; i < n; ++i) {
        std::string key = std::string("k") + static_cast<char>('a' + i);
        props[key] = RandomSchema(rng, depth + 1);
        if (rng() % 2) required.push_back(key);
      }
      return {{"type", "object"}, {"properties", props}, {"required", required}};
    }
  }
}

std::vector<std::string> Grammars(std::mt19937& rng) {
  std::vector<std::string> g = {
      // Multi-byte classes: ranges inside and across UTF-8 lengths, negated ones, surrogate neighbours.
      R"(root ::= ( [一-龥] | [^"\\\x00-\x1F] | [\u00e0-\u00ff]+ "!" | [\U0001F600-\U0001F64F] )* "\"")",
      R"(root ::= "\"" ( [^\u0800-\uFFFF"] | "\\" ["nt] )* "\"" | [\uD7FF-\uE000] [0-9]{1,3})",
      R"(root ::= ( "a" root "b" ) | [^a-z]{0,4})",
  };
  for (int i = 0; i < 8; ++i) {
    auto gbnf = JsonSchemaToGbnf(RandomSchema(rng, 0));
    EXPECT_TRUE(gbnf.ok()) << gbnf.error().message;
    if (gbnf.ok()) g.push_back(*gbnf);
  }
  return g;
}

void ExpectMemoEqualsReference(const std::vector<std::string>& pieces, const std::string& text,
                               size_t memo_states, std::mt19937& rng) {
  auto g = ParseGbnf(text);
  ASSERT_TRUE(g.ok()) << g.error().message << "\n" << text;
  TokenTrie trie(pieces);
  Matcher m(*g, memo_states);
  int checked = 0;
  for (int step = 0; step < 60; ++step) {
    std::vector<int32_t> fast, slow;
    m.AllowedTokens(trie, &fast);
    m.AllowedTokensReference(trie, &slow);
    std::sort(slow.begin(), slow.end());
    ASSERT_EQ(fast, slow) << "step " << step << " of\n" << text;
    // Single-token checks go through the memo too.
    for (int i = 0; i < 20; ++i) {
      const int32_t t = static_cast<int32_t>(rng() % pieces.size());
      if (pieces[t].empty()) continue;
      ASSERT_EQ(m.Accepts(pieces[t]), std::binary_search(slow.begin(), slow.end(), t))
          << "'" << pieces[t] << "'";
    }
    ++checked;
    if (slow.empty()) break;
    // Mostly the longest allowed pieces, so the walk goes deep into strings and multi-byte characters.
    int32_t pick = slow[rng() % slow.size()];
    for (int i = 0; i < 3; ++i) {
      const int32_t other = slow[rng() % slow.size()];
      if (pieces[other].size() > pieces[pick].size()) pick = other;
    }
    ASSERT_TRUE(m.Advance(pieces[pick]));
  }
  EXPECT_GT(checked, 0);
}

TEST(MatcherMemo, AllowsExactlyThePlainWalksTokensInEveryState) {
  std::mt19937 rng(17);
  const std::vector<std::string> pieces = RandomVocabulary(rng, 4000);
  for (const std::string& text : Grammars(rng))
    ExpectMemoEqualsReference(pieces, text, Matcher::kMaxStates, rng);
}

TEST(MatcherMemo, AllowsTheSameTokensWhenTheMemoOverflows) {
  std::mt19937 rng(18);
  const std::vector<std::string> pieces = RandomVocabulary(rng, 1500);
  for (size_t states : {1, 5, 40})
    for (const std::string& text : Grammars(rng)) ExpectMemoEqualsReference(pieces, text, states, rng);
}

TEST(MatcherMemo, ServesARepeatedStateFromItsCachedMaskUnchanged) {
  // Inside an unbounded string every character leads back to the same state.
  std::mt19937 rng(19);
  const std::vector<std::string> pieces = RandomVocabulary(rng, 2000);
  auto g = ParseGbnf(R"(root ::= "\"" [^"\\]* "\"")");
  ASSERT_TRUE(g.ok());
  TokenTrie trie(pieces);
  Matcher m(*g);
  ASSERT_TRUE(m.Advance("\""));
  std::vector<uint64_t> first, again;
  m.AllowedMask(trie, &first);
  ASSERT_TRUE(m.Advance("ab"));
  m.AllowedMask(trie, &again);
  EXPECT_EQ(first, again);
  std::vector<int32_t> slow;
  m.AllowedTokensReference(trie, &slow);
  std::vector<int32_t> from_mask;
  for (size_t t = 0; t < pieces.size(); ++t)
    if (again[t / 64] >> (t % 64) & 1) from_mask.push_back(static_cast<int32_t>(t));
  std::sort(slow.begin(), slow.end());
  EXPECT_EQ(from_mask, slow);
  EXPECT_EQ(again.size(), (pieces.size() + 63) / 64);
}

}  // namespace
}  // namespace rw::grammar
