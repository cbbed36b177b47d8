// The part shared by the tool-call blocks that hold a list of calls, "[call, call, ...]" then a closing tag
// (ToolCallArrayParser: Nemotron Nano v2's JSON array; PythonicCallsParser: LFM2's Python-style calls;
// KimiCallsParser: Kimi's call section, which has no brackets). Lenient in the same ways: no brackets (one
// call), a missing "]", a missing closing tag at the end of output. Call k of the block gets index
// first_index + k.
#pragma once

#include <string_view>

#include "chat/text_scan.h"
#include "chat/tool_call_stream.h"

namespace rw::chat {

class ToolCallList : public ToolCallBlock {
 public:
  // Public so that the parsers inherit it (`using ToolCallList::ToolCallList`); the class stays abstract.
  ToolCallList(size_t first_index, std::string_view close_tag)
      : first_index_(first_index), close_tag_(close_tag) {}

 protected:
  // The index of the call being read.
  size_t CallIndex() const { return first_index_ + n_calls_; }

  // The block ends at `at`; before any call it is malformed instead.
  Result EndAt(size_t at) {
    if (n_calls_ == 0) return Result::kMalformed;
    pos_ = at;
    return Result::kDone;
  }
  // After an element, at offset i (`rest`: the text there, not empty): true when a "," starts another
  // element; otherwise the list is over ("]" consumed; unbracketed, or without its "]", nothing is).
  bool NextElement(size_t i, std::string_view rest) {
    const bool more = bracketed_ && rest[0] == ',';
    pos_ = i + (bracketed_ && (more || rest[0] == ']') ? 1 : 0);
    return more;
  }
  // At the closing tag (offset i, `rest` not empty): kDone past it, kNeedMore while more text may complete
  // it; anything else after the calls ends the block before it (the caller's text).
  Result ClosingTag(size_t i, std::string_view rest, bool final) {
    if (StartsWith(rest, close_tag_)) {
      pos_ = i + close_tag_.size();
      return Result::kDone;
    }
    if (!final && MayBecome(rest, close_tag_)) return Result::kNeedMore;
    return EndAt(pos_);
  }

  size_t first_index_;
  std::string_view close_tag_;
  bool bracketed_ = true;
  size_t n_calls_ = 0;
};

}  // namespace rw::chat
