#include "tokenizer/bpe.h"

#include <gtest/gtest.h>

#include <random>

#include "tokenizer/test_util.h"
#include "tokenizer/unicode.h"

namespace rw::tokenizer {
namespace {

// The spec's algorithm on strings (section 6), deliberately naive: repeatedly merge the adjacent pair with the
// lowest rank, leftmost first.
// `ranks` is keyed by the merge string "A B" (no symbol contains a space: it is Ġ in the alphabet).
std::vector<int32_t> ReferenceBpe(const std::string& piece, const std::unordered_map<std::string, int>& ranks,
                                  const TokenMap& ids) {
  std::vector<std::string> syms;
  for (unsigned char c : piece) syms.push_back(ByteToUnicodeUtf8(c));
  while (syms.size() > 1) {
    int best_rank = INT32_MAX;
    size_t best = 0;
    for (size_t i = 0; i + 1 < syms.size(); ++i) {
      auto it = ranks.find(syms[i] + " " + syms[i + 1]);
      if (it != ranks.end() && it->second < best_rank) {
        best_rank = it->second;
        best = i;
      }
    }
    if (best_rank == INT32_MAX) break;
    syms[best] += syms[best + 1];
    syms.erase(syms.begin() + static_cast<std::ptrdiff_t>(best) + 1);
  }
  std::vector<int32_t> out;
  for (const auto& s : syms) out.push_back(ids.at(s));
  return out;
}

TEST(Bpe, ShortAndLongPathsMatchTheNaiveAlgorithm) {
  const gguf::File* file = testing::SharedQwenVocabFile("qwen35");
  ASSERT_NE(file, nullptr);
  auto tokens = file->GetStringArray("tokenizer.ggml.tokens");
  auto merges = file->GetStringArray("tokenizer.ggml.merges");
  ASSERT_TRUE(tokens.ok() && merges.ok());
  TokenMap ids;
  for (size_t i = 0; i < tokens->size(); ++i) ids[(*tokens)[i]] = static_cast<int32_t>(i);
  std::unordered_map<std::string, int> ranks;
  for (size_t r = 0; r < merges->size(); ++r) ranks.emplace((*merges)[r], static_cast<int>(r));
  BpeMerger bpe;
  ASSERT_TRUE(bpe.Init(&ids, *merges).ok());
  EXPECT_EQ(bpe.n_merges(), ranks.size());

  const std::vector<std::string> parts = {"the", " the", "ing", "a", "aa", " ", "  ", "\n", "tion", "\xE4\xBD\xA0",
                                          "\xF0\x9F\xA6\x99", "\xC3\xA9", "ab", "123", "=", "==", "\xFF", "\xE2\x80"};
  std::mt19937 rng(7);
  int n_long = 0;
  for (int iter = 0; iter < 200; ++iter) {
    std::string piece;
    const int n_parts = iter % 4 == 0 ? 40 + static_cast<int>(rng() % 80) : 1 + static_cast<int>(rng() % 10);
    for (int k = 0; k < n_parts; ++k) piece += parts[rng() % parts.size()];
    n_long += piece.size() > 128;
    std::vector<int32_t> got, got_cached, again;
    bpe.Encode(piece, &got);
    bpe.EncodeCached(piece, &got_cached);
    bpe.EncodeCached(piece, &again);
    const auto want = ReferenceBpe(piece, ranks, ids);
    ASSERT_EQ(got, want) << "piece of " << piece.size() << " bytes";
    ASSERT_EQ(got_cached, want);
    ASSERT_EQ(again, want);
  }
  EXPECT_GT(n_long, 10);  // both merge paths were exercised
}

TEST(Bpe, IgnoresMalformedMergesAndKeepsTheFirstRankOfDuplicates) {
  // Vocabulary: bytes a, b, c and the merges' results.
  TokenMap ids = {{"a", 0}, {"b", 1}, {"c", 2}, {"ab", 3}, {"bc", 4}, {"abc", 5}};
  BpeMerger bpe;
  ASSERT_TRUE(bpe.Init(&ids, {"nospace", "b c", "a b", "b c", "ab c", " x"}).ok());
  std::vector<int32_t> out;
  bpe.Encode("abc", &out);  // "b c" (rank 1) before "a b" (rank 2): a + bc, no merge "a bc" -> [a, bc]
  EXPECT_EQ(out, (std::vector<int32_t>{0, 4}));
  out.clear();
  bpe.Encode("abab", &out);
  EXPECT_EQ(out, (std::vector<int32_t>{3, 3}));
  out.clear();
  bpe.Encode("d", &out);  // no token for "d": dropped, as llama.cpp does
  EXPECT_TRUE(out.empty());
}

}  // namespace
}  // namespace rw::tokenizer
