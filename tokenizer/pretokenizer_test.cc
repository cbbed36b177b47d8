#include "tokenizer/pretokenizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>

#include "tokenizer/pcre2_reference.h"
#include "tokenizer/unicode.h"

namespace rw::tokenizer {
namespace {

using ::testing::ElementsAre;

std::vector<std::string> Split(PreType type, const std::string& text) {
  std::vector<uint32_t> cpts;
  DecodeUtf8Lenient(text, &cpts);
  std::vector<uint32_t> lengths;
  std::vector<uint8_t> scratch;
  PreTokenize(type, cpts, &lengths, &scratch);
  std::vector<std::string> out;
  size_t p = 0;
  for (uint32_t len : lengths) {
    std::string piece;
    for (size_t k = p; k < p + len; ++k) AppendUtf8(cpts[k], &piece);
    out.push_back(piece);
    p += len;
  }
  return out;
}

TEST(PreTokenizer, SplitsWordsWithTheirLeadingSpaceAndDigitsOneByOne) {
  EXPECT_THAT(Split(PreType::kQwen2, "Hello world 2026!"),
              ElementsAre("Hello", " world", " ", "2", "0", "2", "6", "!"));
  EXPECT_THAT(Split(PreType::kQwen2, "I'm HE'LL 'quoted'"),
              ElementsAre("I", "'m", " HE", "'LL", " '", "quoted", "'"));
}

TEST(PreTokenizer, LeavesTheLastSpaceOfARunToTheNextWord) {
  EXPECT_THAT(Split(PreType::kQwen2, "a   b"), ElementsAre("a", "  ", " b"));
  EXPECT_THAT(Split(PreType::kQwen2, "   "), ElementsAre("   "));
  EXPECT_THAT(Split(PreType::kQwen2, "x \n\n  y"), ElementsAre("x", " \n\n", " ", " y"));
  EXPECT_THAT(Split(PreType::kQwen2, "a.\r\n"), ElementsAre("a", ".\r\n"));
}

TEST(PreTokenizer, Qwen35KeepsCombiningMarksInsideWords) {
  const std::string text = "re\xCC\x81sume\xCC\x81 \xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8\xE0\xA5\x8D\xE0\xA4\xA4\xE0\xA5\x87";
  EXPECT_THAT(Split(PreType::kQwen35, text),
              ElementsAre("re\xCC\x81sume\xCC\x81", " \xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8\xE0\xA5\x8D\xE0\xA4\xA4\xE0\xA5\x87"));
  EXPECT_THAT(Split(PreType::kQwen2, "re\xCC\x81sume\xCC\x81"),
              ElementsAre("re", "\xCC\x81sume", "\xCC\x81"));
}

TEST(PreTokenizer, PiecesCoverTheInputExactly) {
  const std::string text = "\xF0\x9F\xA6\x99 x\xEF\xBF\xBDy\t\t\n";
  std::string joined;
  for (const auto& p : Split(PreType::kQwen35, text)) joined += p;
  EXPECT_EQ(joined, text);
  EXPECT_TRUE(Split(PreType::kQwen2, "").empty());
}

TEST(PreTokenizer, MapsPreNamesAndRejectsOthers) {
  PreType t;
  EXPECT_TRUE(ParsePreType("qwen35", &t));
  EXPECT_EQ(t, PreType::kQwen35);
  EXPECT_TRUE(ParsePreType("qwen2", &t));
  EXPECT_EQ(t, PreType::kQwen2);
  EXPECT_TRUE(ParsePreType("kormo", &t));
  EXPECT_FALSE(ParsePreType("default", &t));
  EXPECT_FALSE(ParsePreType("llama3", &t));
  EXPECT_FALSE(ParsePreType("", &t));
}

// Random strings over an alphabet of letters, marks, digits of several kinds, punctuation, every kind of
// whitespace and emoji, split by the scanner and by the original regex in PCRE2.
TEST(PreTokenizer, AgreesWithTheHuggingFaceRegexInPcre2) {
  const std::vector<std::string> alphabet = {
      "a", "b", "Z", "s", "S", "t", "T", "r", "e", "E", "v", "l", "L", "m", "M", "d", "D", "'", "'", "'", "0", "7",
      " ", " ", " ", "  ", "\t", "\n", "\r", "\v", "\f", "\xC2\x85", "\xC2\xA0", "\xE2\x80\x89", "\xE3\x80\x80",
      "\xE2\x80\xA8", ".", ",", "!", "?", "(", ")", "-", "_", "\"", "`", "#", "\xC3\xA9", "\xC3\x9F", "\xCC\x81",
      "\xCC\x80", "\xD0\x96", "\xD0\xB4", "\xE0\xA4\xA8", "\xE0\xA5\x8D", "\xE0\xA4\xBE", "\xE0\xA5\x87",
      "\xE4\xBD\xA0", "\xE5\xA5\xBD", "\xEF\xBC\x8C", "\xD9\xA3", "\xC2\xB2", "\xE2\x85\xAB", "\xC2\xBD",
      "\xF0\x9F\xA6\x99", "\xE2\x80\x8D", "\xEF\xB8\x8F", "\xEF\xBF\xBD", "\xE2\x82\xAC", "\xD8\xB9", "\xD9\x8E"};
  std::mt19937 rng(1234);
  for (PreType type : {PreType::kQwen2, PreType::kQwen35}) {
    testing::Pcre2Splitter regex(type);
    ASSERT_TRUE(regex.ok());
    int n_checked = 0;
    for (int iter = 0; iter < 3000; ++iter) {
      std::string text;
      const int len = static_cast<int>(rng() % 24);
      for (int k = 0; k < len; ++k) text += alphabet[rng() % alphabet.size()];
      ASSERT_EQ(Split(type, text), regex.Split(text)) << PreTypeName(type) << " text: " << text;
      ++n_checked;
    }
    EXPECT_EQ(n_checked, 3000);
  }
}

}  // namespace
}  // namespace rw::tokenizer
