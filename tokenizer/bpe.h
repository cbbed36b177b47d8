// Byte-level BPE merging of one pre-tokenized piece (spec section 6). Works on interned symbol ids instead of
// strings: every token text and every merge operand/result gets a symbol id, a merge is a map
// (left symbol, right symbol) -> (rank, merged symbol). Lowest rank merges first, ties to the leftmost pair,
// exactly as llama.cpp's priority queue.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/expected.h"

namespace rw::tokenizer {

// Token text -> id with string_view lookups.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

class BpeMerger {
 public:
  BpeMerger() = default;
  BpeMerger(const BpeMerger&) = delete;
  BpeMerger& operator=(const BpeMerger&) = delete;

  // `token_ids` maps token text -> id (the vocabulary); merges are "A B" strings, rank = index, split at the
  // first space at index >= 1; duplicates keep the first rank; entries without such a space are ignored.
  Status Init(const TokenMap* token_ids, const std::vector<std::string>& merges);

  // Appends the token ids of one piece given as raw bytes (the byte-to-unicode mapping is applied here).
  void Encode(std::string_view piece, std::vector<int32_t>* out) const;
  // Same with a cache of recent pieces (thread-safe).
  void EncodeCached(std::string_view piece, std::vector<int32_t>* out) const;

  size_t n_merges() const { return merges_.size(); }

 private:
  struct Merge {
    int32_t rank;
    int32_t result;  // symbol id
  };
  static uint64_t Key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  // Symbol ids: a token's id for token texts, n_tokens + k for the k-th other text a merge mentions.
  int32_t Intern(std::string_view text);
  const Merge* FindMerge(int32_t a, int32_t b) const {
    auto it = merges_.find(Key(a, b));
    return it == merges_.end() ? nullptr : &it->second;
  }
  void EmitSymbol(int32_t sym, std::vector<int32_t>* out) const;
  void MergeSmall(std::vector<int32_t>* syms) const;
  void MergeLarge(std::vector<int32_t>* syms) const;

  const TokenMap* token_ids_ = nullptr;
  int32_t n_tokens_ = 0;      // symbol ids below this are token ids
  TokenMap extra_sym_;        // texts that are not tokens -> symbol id
  std::vector<std::string> extra_text_;  // [n_extra] text of symbol n_tokens_ + k
  int32_t byte_sym_[256] = {};
  std::unordered_map<uint64_t, Merge> merges_;

  static constexpr size_t kCacheMaxEntries = 1 << 16;
  static constexpr size_t kCacheMaxPieceBytes = 64;
  mutable std::mutex cache_mu_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

}  // namespace rw::tokenizer
