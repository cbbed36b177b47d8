#include "tokenizer/tokenizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "base/file.h"
#include "gguf/gguf.h"
#include "tokenizer/test_util.h"
#include "tokenizer/unicode.h"

namespace rw::tokenizer {
namespace {

using testing::DataPath;
using ::testing::ElementsAreArray;

std::string Escape(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7F) { char b[8]; std::snprintf(b, sizeof b, "\\x%02x", c); out += b; }
    else out += static_cast<char>(c);
  }
  return out;
}

std::string Join(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += " " + std::to_string(id);
  return s;
}

class TinyVocab : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { tok_ = testing::LoadTinyVocab().release(); }
  static void TearDownTestSuite() { delete tok_; tok_ = nullptr; }
  void SetUp() override { ASSERT_NE(tok_, nullptr); }
  static Tokenizer* tok_;
};
Tokenizer* TinyVocab::tok_ = nullptr;

TEST_F(TinyVocab, MatchesLlamaCppVectorsWithAndWithoutSpecialParsing) {
  auto text = ReadFileToString(DataPath("tokenizer/tokenizer_tests.json"));
  ASSERT_TRUE(text.ok());
  auto j = nlohmann::json::parse(*text);
  int n_cases = 0, n_special_differs = 0;
  for (const auto& c : j.at("cases")) {
    const std::string s = c.at("text").get<std::string>();
    const auto want_special = c.at("ids_parse_special").get<std::vector<int32_t>>();
    const auto want_plain = c.at("ids_no_parse_special").get<std::vector<int32_t>>();
    EXPECT_THAT(tok_->Encode(s, true, false), ElementsAreArray(want_special)) << "text: " << Escape(s);
    EXPECT_THAT(tok_->Encode(s, false, false), ElementsAreArray(want_plain)) << "text: " << Escape(s);
    // add_special adds nothing: the vocabulary says add_bos_token = false.
    EXPECT_THAT(tok_->Encode(s, true, true), ElementsAreArray(want_special)) << "text: " << Escape(s);
    // llama_detokenize(unparse_special=true) gives the input back for every case.
    EXPECT_EQ(tok_->Decode(want_special), s);
    EXPECT_EQ(tok_->Decode(want_plain), s);
    ++n_cases;
    n_special_differs += want_special != want_plain;
  }
  EXPECT_EQ(n_cases, 40);
  EXPECT_GT(n_special_differs, 0);
}

TEST_F(TinyVocab, DerivesSpecialIdsLikeLlamaCpp) {
  auto text = ReadFileToString(DataPath("tokenizer/tiny-qwen35-model_info.json"));
  ASSERT_TRUE(text.ok());
  auto info = nlohmann::json::parse(*text);
  EXPECT_EQ(tok_->n_vocab(), info.at("n_vocab").get<int>());
  EXPECT_EQ(tok_->bos_id(), info.at("bos").get<int>());
  EXPECT_EQ(tok_->eos_id(), info.at("eos").get<int>());
  EXPECT_EQ(tok_->eot_id(), info.at("eot").get<int>());
  EXPECT_EQ(tok_->pad_id(), info.at("pad").get<int>());
  EXPECT_EQ(tok_->newline_id(), info.at("nl").get<int>());
  EXPECT_EQ(tok_->fim_pre_id(), info.at("fim_pre").get<int>());
  EXPECT_EQ(tok_->fim_suf_id(), info.at("fim_suf").get<int>());
  EXPECT_EQ(tok_->fim_mid_id(), info.at("fim_mid").get<int>());
  EXPECT_EQ(tok_->fim_pad_id(), info.at("fim_pad").get<int>());
  EXPECT_EQ(tok_->fim_rep_id(), info.at("fim_rep").get<int>());
  EXPECT_EQ(tok_->fim_sep_id(), info.at("fim_sep").get<int>());
  EXPECT_THAT(tok_->eog_ids(), ElementsAreArray(info.at("eog_ids").get<std::vector<int32_t>>()));
  std::vector<int32_t> control, user;
  for (int32_t id = 0; id < tok_->n_vocab(); ++id) {
    if (tok_->IsControl(id)) control.push_back(id);
    if (tok_->IsUserDefined(id)) user.push_back(id);
  }
  EXPECT_THAT(control, ElementsAreArray(info.at("control_ids").get<std::vector<int32_t>>()));
  EXPECT_THAT(user, ElementsAreArray(info.at("user_defined_ids").get<std::vector<int32_t>>()));
  EXPECT_FALSE(tok_->add_bos());
  EXPECT_FALSE(tok_->add_eos());
  EXPECT_EQ(tok_->pre_type(), PreType::kQwen35);
  for (int32_t id : tok_->eog_ids()) EXPECT_TRUE(tok_->IsEog(id));
  EXPECT_FALSE(tok_->IsEog(3975));
  EXPECT_FALSE(tok_->IsEog(-1));
  EXPECT_FALSE(tok_->IsEog(tok_->n_vocab()));
}

TEST_F(TinyVocab, FindsExactVocabularyEntries) {
  EXPECT_EQ(tok_->FindToken("<|im_start|>"), std::optional<int32_t>(3975));
  EXPECT_EQ(tok_->FindToken("<think>"), std::optional<int32_t>(3998));
  EXPECT_EQ(tok_->FindToken("!"), std::optional<int32_t>(0));
  EXPECT_EQ(tok_->FindToken("<|im_start|"), std::nullopt);
  EXPECT_EQ(tok_->FindToken(""), std::nullopt);
}

TEST_F(TinyVocab, RendersControlTokensOnlyWhenUnparsing) {
  EXPECT_EQ(tok_->TokenToPiece(3975, true), "<|im_start|>");
  EXPECT_EQ(tok_->TokenToPiece(3975, false), "");
  EXPECT_EQ(tok_->TokenToPiece(3998, false), "<think>");  // USER_DEFINED: always
  EXPECT_EQ(tok_->TokenToPiece(220, false), " ");         // "Ġ"
  EXPECT_EQ(tok_->TokenToPiece(198, false), "\n");        // "Ċ"
  EXPECT_EQ(tok_->TokenToPiece(-1), "");
  EXPECT_EQ(tok_->TokenToPiece(tok_->n_vocab()), "");
  const std::vector<int32_t> ids = {3975, 872, 3976};
  EXPECT_EQ(tok_->Decode(ids, false), tok_->TokenToPiece(872));
}

TEST_F(TinyVocab, MatchesUserDefinedTokensEvenWithoutSpecialParsing) {
  const auto ids = tok_->Encode("a<think>b</think>", false, false);
  EXPECT_NE(std::find(ids.begin(), ids.end(), 3998), ids.end());
  EXPECT_NE(std::find(ids.begin(), ids.end(), 3999), ids.end());
  const auto plain = tok_->Encode("<|im_start|>", false, false);
  EXPECT_EQ(std::find(plain.begin(), plain.end(), 3975), plain.end());
  EXPECT_THAT(tok_->Encode("<|im_start|>", true, false), ElementsAreArray({3975}));
}

TEST_F(TinyVocab, ReplacesEachInvalidUtf8ByteWithU_FFFD) {
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(tok_->Encode("a\xFF" "b", false, false), tok_->Encode("a" + fffd + "b", false, false));
  EXPECT_EQ(tok_->Encode("\xE4\xBD", false, false), tok_->Encode(fffd + fffd, false, false));
  EXPECT_EQ(tok_->Decode(tok_->Encode("x\x80y", false, false)), "x" + fffd + "y");
  // An over-long form is accepted and re-encoded canonically: C1 81 is 'A'.
  EXPECT_EQ(tok_->Encode("\xC1\x81", false, false), tok_->Encode("A", false, false));
  // Over-long (shorter when re-encoded) plus an invalid byte (longer): same length, different bytes.
  EXPECT_EQ(tok_->Encode("\xE0\x81\x81\xFF", false, false), tok_->Encode("A" + fffd, false, false));
  // Bytes that can never start a sequence, and a code point above U+10FFFF.
  EXPECT_EQ(tok_->Decode(tok_->Encode("\xF8\xF5\x90\x80\x80", false, false)), fffd + fffd + fffd + fffd + fffd);
}

TEST_F(TinyVocab, RoundTripsArbitraryValidText) {
  const std::string texts[] = {
      "", "x", "  \t\n\r\n  ", "The year 2026: 12,345.67 dollars!",
      "\xF0\x9F\xA6\x99\xF0\x9F\xA6\x99 llama \xE2\x80\x8D\xE2\x80\x8D",
      "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\n\xE4\xBD\xA0\xE5\xA5\xBD<|im_end|>\n",
      "<<|im_end|>|im_end|>>", "<think><think></think>", "\x01\x02\x7F\xC2\x80", std::string(500, ' ') + "x",
  };
  for (const std::string& t : texts) {
    EXPECT_EQ(tok_->Decode(tok_->Encode(t, true, false)), t) << Escape(t);
    EXPECT_EQ(tok_->Decode(tok_->Encode(t, false, false)), t) << Escape(t);
  }
}

TEST_F(TinyVocab, SurvivesRandomBytesAndRoundTripsWellFormedOnes) {
  std::mt19937 rng(99);
  const std::vector<std::string> parts = {"<|im_start|>", "<|im_end|>", "<think>", "</think>", "<|", "|>", "<",
                                          " ", "\n", "a", "Z", "9", "'s", "\xC3\xA9", "\xF0\x9F\xA6\x99", "\xFF",
                                          "\xE4\xBD", "\xCC\x81", "\r\n", "\t"};
  int n_well_formed = 0;
  for (int iter = 0; iter < 2000; ++iter) {
    std::string text;
    const int n = static_cast<int>(rng() % 30);
    for (int k = 0; k < n; ++k) {
      if (rng() % 4 == 0) text += static_cast<char>(rng() & 0xFF);
      else text += parts[rng() % parts.size()];
    }
    std::vector<uint32_t> cpts;
    const bool canonical = DecodeUtf8Lenient(text, &cpts);
    for (bool special : {false, true}) {
      const auto ids = tok_->Encode(text, special, true);
      for (int32_t id : ids) ASSERT_TRUE(tok_->IsValid(id));
      if (canonical) {
        ASSERT_EQ(tok_->Decode(ids), text) << Escape(text);
      }
    }
    n_well_formed += canonical;
  }
  EXPECT_GT(n_well_formed, 50);
}

TEST_F(TinyVocab, PrefersTheLongerOfOverlappingSpecialTokens) {
  // Adjacent special tokens are both found, whatever their order in the special-token list.
  const auto ids = tok_->Encode("<|endoftext|><|im_end|>", true, false);
  EXPECT_THAT(ids, ElementsAreArray({3974, 3976}));
  // A partial special token is plain text.
  const auto partial = tok_->Encode("<|im_end|", true, false);
  EXPECT_EQ(std::find(partial.begin(), partial.end(), 3976), partial.end());
  EXPECT_EQ(tok_->Decode(partial), "<|im_end|");
}

// llama.cpp's own tokenizer test files: models/ggml-vocab-{qwen2,qwen35}.gguf.inp/.out.
void CheckLlamaCppVocabTest(const std::string& pre, int expected_cases) {
  const Tokenizer* tok = testing::SharedQwenTokenizer(pre);
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->n_vocab(), 151936);
  auto inp = ReadFileToString(DataPath("tokenizer/ggml-vocab-" + pre + ".gguf.inp"));
  auto out = ReadFileToString(DataPath("tokenizer/ggml-vocab-" + pre + ".gguf.out"));
  ASSERT_TRUE(inp.ok() && out.ok());
  std::vector<std::string> inputs;
  const std::string sep = "\n__ggml_vocab_test__\n";
  size_t pos = 0;
  for (size_t next; (next = inp->find(sep, pos)) != std::string::npos; pos = next + sep.size()) {
    inputs.push_back(inp->substr(pos, next - pos));
  }
  std::vector<std::string> lines;
  std::istringstream ls(*out);
  for (std::string line; std::getline(ls, line);) {
    // The files write ids separated by spaces, some with a leading space: normalise to Join's form.
    std::istringstream ids(line);
    std::vector<int32_t> v;
    for (int32_t id; ids >> id;) v.push_back(id);
    lines.push_back(Join(v));
  }
  ASSERT_EQ(inputs.size(), lines.size());
  EXPECT_EQ(static_cast<int>(inputs.size()), expected_cases);
  int n_pass = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto ids = tok->Encode(inputs[i], false, false);
    EXPECT_EQ(Join(ids), lines[i]) << pre << " case " << i << ": " << Escape(inputs[i]);
    n_pass += Join(ids) == lines[i];
    EXPECT_EQ(tok->Decode(ids), inputs[i]) << pre << " case " << i;
  }
  std::printf("[ %s ] %d / %zu llama.cpp vectors match\n", pre.c_str(), n_pass, inputs.size());
}

TEST(Tokenizer, MatchesLlamaCppQwen2VocabVectors) { CheckLlamaCppVocabTest("qwen2", 46); }
TEST(Tokenizer, MatchesLlamaCppQwen35VocabVectors) { CheckLlamaCppVocabTest("qwen35", 50); }

TEST(Tokenizer, MatchesTheSpecTableForQwen35) {
  const Tokenizer* tok = testing::SharedQwenTokenizer("qwen35");
  ASSERT_NE(tok, nullptr);
  EXPECT_THAT(tok->Encode("    Hello\n    Hello", false, false), ElementsAreArray({262, 21927, 198, 262, 21927}));
  EXPECT_THAT(tok->Encode("re\xCC\x81sume\xCC\x81", false, false), ElementsAreArray({265, 53839, 31323, 53839}));
  EXPECT_THAT(tok->Encode("3333", false, false), ElementsAreArray({18, 18, 18, 18}));
  EXPECT_EQ(tok->eos_id(), 151643);
  EXPECT_EQ(tok->FindToken("<|im_end|>"), std::optional<int32_t>(151645));
  EXPECT_TRUE(tok->IsEog(151645));
}

TEST(Tokenizer, RejectsAnUnknownPreTokenizer) {
  auto file = testing::OpenBytes(testing::WithPre(testing::TinyVocabBytes(), "llama3"));
  ASSERT_NE(file, nullptr);
  auto tok = Tokenizer::FromGguf(*file);
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.error().kind, ErrorKind::kUnsupported);
  EXPECT_THAT(tok.error().message, ::testing::HasSubstr("llama3"));
}

TEST(Tokenizer, AcceptsTheQwen2PreTokenizerAliases) {
  for (const char* pre : {"deepseek-r1-qwen", "megrez", "qwen2"}) {
    auto file = testing::OpenBytes(testing::WithPre(testing::TinyVocabBytes(), pre));
    ASSERT_NE(file, nullptr) << pre;
    auto tok = Tokenizer::FromGguf(*file);
    ASSERT_TRUE(tok.ok()) << pre;
    EXPECT_EQ((*tok)->pre_type(), PreType::kQwen2);
  }
}

TEST(Tokenizer, RejectsAFileWithoutAVocabulary) {
  // A GGUF header with no metadata at all.
  std::string bytes("GGUF\x03\x00\x00\x00", 8);
  bytes += std::string(16, '\0');
  auto file = testing::OpenBytes(bytes);
  ASSERT_NE(file, nullptr);
  auto tok = Tokenizer::FromGguf(*file);
  ASSERT_FALSE(tok.ok());
}

}  // namespace
}  // namespace rw::tokenizer
