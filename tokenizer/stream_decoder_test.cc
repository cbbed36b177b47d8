#include "tokenizer/stream_decoder.h"

#include <gtest/gtest.h>

#include "tokenizer/test_util.h"
#include "tokenizer/unicode.h"

namespace rw::tokenizer {
namespace {

bool IsValidUtf8(const std::string& s) { return SanitizeUtf8(s) == s; }

TEST(StreamDecoder, HoldsBackSplitCharactersUntilComplete) {
  auto tok = testing::LoadTinyVocab();
  ASSERT_NE(tok, nullptr);
  const std::string text =
      "emoji \xF0\x9F\xA6\x99\xF0\x9F\x9A\x80\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD \xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9 "
      "\xE4\xBD\xA0\xE5\xA5\xBD\xE4\xB8\x96\xE7\x95\x8C \xED\x95\x9C\xEA\xB5\xAD\xEC\x96\xB4 \xC3\xA9t\xC3\xA9 <think>x</think>";
  const auto ids = tok->Encode(text, true, false);
  // The tiny vocabulary has no token for these characters: some tokens must end mid-character.
  int n_split = 0;
  for (int32_t id : ids) n_split += !IsValidUtf8(tok->TokenToPiece(id));
  EXPECT_GT(n_split, 4);

  StreamDecoder dec(*tok);
  std::string joined;
  int n_held = 0;
  for (int32_t id : ids) {
    const std::string chunk = dec.Feed(id);
    EXPECT_TRUE(IsValidUtf8(chunk));
    n_held += dec.pending() > 0;
    joined += chunk;
  }
  joined += dec.Flush();
  EXPECT_EQ(joined, text);
  EXPECT_EQ(joined, tok->Decode(ids));
  EXPECT_GT(n_held, 0);
  EXPECT_EQ(dec.pending(), 0u);
}

TEST(StreamDecoder, EmitsACharacterOnlyWithItsLastByte) {
  auto tok = testing::LoadTinyVocab();
  ASSERT_NE(tok, nullptr);
  StreamDecoder dec(*tok);
  EXPECT_EQ(dec.FeedBytes("a\xF0"), "a");
  EXPECT_EQ(dec.FeedBytes("\x9F"), "");
  EXPECT_EQ(dec.FeedBytes("\xA6"), "");
  EXPECT_EQ(dec.pending(), 3u);
  EXPECT_EQ(dec.FeedBytes("\x99!"), "\xF0\x9F\xA6\x99!");
  EXPECT_EQ(dec.Flush(), "");
}

TEST(StreamDecoder, ReplacesInvalidBytesAndAnUnfinishedTail) {
  auto tok = testing::LoadTinyVocab();
  ASSERT_NE(tok, nullptr);
  StreamDecoder dec(*tok);
  EXPECT_EQ(dec.FeedBytes("\xE4\xBD"), "");
  EXPECT_EQ(dec.FeedBytes("x"), "\xEF\xBF\xBDx");  // the character never completed
  EXPECT_EQ(dec.FeedBytes("\xFF" "y"), "\xEF\xBF\xBDy");
  EXPECT_EQ(dec.FeedBytes("\xE2\x82"), "");
  EXPECT_EQ(dec.Flush(), "\xEF\xBF\xBD");
  EXPECT_EQ(dec.pending(), 0u);
}

TEST(StreamDecoder, HidesControlTokensWhenAskedTo) {
  auto tok = testing::LoadTinyVocab();
  ASSERT_NE(tok, nullptr);
  StreamDecoder shown(*tok), hidden(*tok, /*unparse_special=*/false);
  const int32_t im_end = *tok->FindToken("<|im_end|>");
  EXPECT_EQ(shown.Feed(im_end), "<|im_end|>");
  EXPECT_EQ(hidden.Feed(im_end), "");
}

}  // namespace
}  // namespace rw::tokenizer
