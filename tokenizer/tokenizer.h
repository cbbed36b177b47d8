// Byte-level BPE tokenizer for Qwen-family GGUF files (pre-tokenizers qwen2 and qwen35), matching llama.cpp's
// llama_tokenize / llama_token_to_piece / llama_detokenize. Spec: ../shared/spec/tokenizer-and-chat.md 1-8.
// Immutable after FromGguf; all methods are const and thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/expected.h"
#include "tokenizer/bpe.h"
#include "tokenizer/pretokenizer.h"

namespace rw::gguf {
class File;
}

namespace rw::tokenizer {

// tokenizer.ggml.token_type values.
enum class TokenType : int32_t {
  kUndefined = 0, kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6,
};

// Attribute bits llama.cpp derives from the type (plus its text heuristics).
enum TokenAttr : uint32_t {
  kAttrUndefined = 1 << 0, kAttrUnknown = 1 << 1, kAttrUnused = 1 << 2, kAttrNormal = 1 << 3,
  kAttrControl = 1 << 4, kAttrUserDefined = 1 << 5, kAttrByte = 1 << 6,
};

class Tokenizer {
 public:
  // Reads tokenizer.ggml.* keys. Errors: missing tokens/merges, model other than "gpt2", pre-tokenizer other
  // than qwen2 (and its aliases) / qwen35, malformed arrays.
  static Expected<std::unique_ptr<Tokenizer>> FromGguf(const gguf::File& file);

  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Text -> ids. parse_special: CONTROL tokens written in the text become their ids (USER_DEFINED ones always
  // do). add_special: prepend BOS / append EOS where the GGUF's add_bos / add_eos flags say so.
  std::vector<int32_t> Encode(std::string_view text, bool parse_special, bool add_special) const;
  // Bytes of one token (may be part of a UTF-8 character). CONTROL/UNKNOWN tokens give their text only if
  // unparse_special; USER_DEFINED always; UNUSED/UNDEFINED nothing. Out-of-range ids give "".
  std::string TokenToPiece(int32_t id, bool unparse_special = true) const;
  // Concatenated pieces (llama_detokenize with remove_special=false). Raw bytes: may be invalid UTF-8.
  std::string Decode(std::span<const int32_t> ids, bool unparse_special = true) const;

  int32_t n_vocab() const { return static_cast<int32_t>(tokens_.size()); }
  bool IsValid(int32_t id) const { return id >= 0 && id < n_vocab(); }
  bool IsEog(int32_t id) const;
  bool IsControl(int32_t id) const { return IsValid(id) && (attrs_[id] & kAttrControl); }
  bool IsUserDefined(int32_t id) const { return IsValid(id) && (attrs_[id] & kAttrUserDefined); }
  uint32_t Attr(int32_t id) const { return IsValid(id) ? attrs_[id] : 0; }
  // Stored vocabulary text of a token (byte-level alphabet for normal tokens).
  const std::string& TokenText(int32_t id) const;
  // Exact vocabulary entry, e.g. "<|im_start|>" or "Ġworld".
  std::optional<int32_t> FindToken(std::string_view text) const;
  // Sorted ascending.
  const std::vector<int32_t>& eog_ids() const { return eog_ids_; }

  // Special ids, -1 if none.
  int32_t bos_id() const { return bos_; }
  int32_t eos_id() const { return eos_; }
  int32_t eot_id() const { return eot_; }
  int32_t eom_id() const { return eom_; }
  int32_t pad_id() const { return pad_; }
  int32_t newline_id() const { return newline_; }
  int32_t fim_pre_id() const { return fim_pre_; }
  int32_t fim_suf_id() const { return fim_suf_; }
  int32_t fim_mid_id() const { return fim_mid_; }
  int32_t fim_pad_id() const { return fim_pad_; }
  int32_t fim_rep_id() const { return fim_rep_; }
  int32_t fim_sep_id() const { return fim_sep_; }
  bool add_bos() const { return add_bos_; }
  bool add_eos() const { return add_eos_; }
  PreType pre_type() const { return pre_; }
  size_t n_merges() const { return bpe_.n_merges(); }

 private:
  Tokenizer() = default;
  Status Load(const gguf::File& file);
  void DeriveSpecialIds();
  void BuildSpecialIndex();
  // One raw-text fragment (no special tokens inside): pre-tokenize, byte-encode, merge.
  void EncodeFragment(std::string_view text, std::vector<int32_t>* out) const;

  std::vector<std::string> tokens_;  // [n_vocab] vocabulary text
  std::vector<uint32_t> attrs_;      // [n_vocab] TokenAttr bits
  std::vector<std::string> pieces_;  // [n_vocab] TokenToPiece(id, unparse_special=true)
  TokenMap token_ids_;
  BpeMerger bpe_;
  PreType pre_ = PreType::kQwen2;

  // Special tokens matched in raw text: CONTROL / USER_DEFINED / UNKNOWN, longest text first.
  std::vector<int32_t> special_tokens_;
  // Candidates by the first two bytes of their text (key b0 | b1 << 8), or by the byte for one-byte texts;
  // values are indices into special_tokens_ in ascending order (= priority order).
  std::unordered_map<uint32_t, std::vector<int32_t>> special_by_prefix_;
  std::unordered_map<uint32_t, std::vector<int32_t>> special_by_byte_;
  bool special_first_byte_[256] = {};
  std::vector<int32_t> eog_ids_;
  int32_t bos_ = -1, eos_ = -1, eot_ = -1, eom_ = -1, unk_ = -1, sep_ = -1, pad_ = -1, mask_ = -1;
  int32_t fim_pre_ = -1, fim_suf_ = -1, fim_mid_ = -1, fim_pad_ = -1, fim_rep_ = -1, fim_sep_ = -1;
  int32_t newline_ = -1;
  bool add_bos_ = false, add_eos_ = false;
};

}  // namespace rw::tokenizer
