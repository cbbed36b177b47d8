// Streaming detokenizer: token ids in, UTF-8 text chunks out. A token can end in the middle of a multi-byte
// character (byte-level BPE splits emoji and CJK characters across tokens); the incomplete tail is held back
// until the next token completes it. Chunks are always valid UTF-8: a byte sequence that turns out invalid is
// replaced by U+FFFD (one per maximal invalid subpart), and Flush() replaces a still-incomplete tail the same way.
// For valid UTF-8 output the concatenated chunks equal Tokenizer::Decode of the same ids.
#pragma once

#include <cstdint>
#include <string>

#include "tokenizer/tokenizer.h"

namespace rw::tokenizer {

class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok, bool unparse_special = true)
      : tok_(&tok), unparse_special_(unparse_special) {}

  // Text completed by this token (possibly empty).
  std::string Feed(int32_t id);
  // Feeds raw bytes (a piece) directly; used by Feed and tests.
  std::string FeedBytes(std::string_view bytes);
  // End of stream: whatever is still buffered, invalid tail replaced by U+FFFD. The decoder is then empty.
  std::string Flush();
  // Bytes held back (0..3).
  size_t pending() const { return pending_.size(); }
  void Reset() { pending_.clear(); }

 private:
  const Tokenizer* tok_;
  bool unparse_special_;
  std::string pending_;  // incomplete UTF-8 tail carried to the next call
};

}  // namespace rw::tokenizer
