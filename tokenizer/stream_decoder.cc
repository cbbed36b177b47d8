#include "tokenizer/stream_decoder.h"

#include "tokenizer/unicode.h"

namespace rw::tokenizer {

std::string StreamDecoder::Feed(int32_t id) { return FeedBytes(tok_->TokenToPiece(id, unparse_special_)); }

std::string StreamDecoder::FeedBytes(std::string_view bytes) {
  pending_.append(bytes.data(), bytes.size());
  const size_t tail = IncompleteUtf8Tail(pending_);
  std::string out = SanitizeUtf8(std::string_view(pending_).substr(0, pending_.size() - tail));
  pending_.erase(0, pending_.size() - tail);
  return out;
}

std::string StreamDecoder::Flush() {
  std::string out = SanitizeUtf8(pending_);
  pending_.clear();
  return out;
}

}  // namespace rw::tokenizer
