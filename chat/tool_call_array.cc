#include "chat/tool_call_array.h"

#include "chat/text_scan.h"

namespace rw::chat {

using Result = ToolCallBlock::Result;

Result ToolCallArrayParser::Step(bool final, std::vector<ToolCallDelta>* out, bool* progressed) {
  std::string_view all(buf_);
  size_t i = SkipWs(all, pos_);
  std::string_view rest = all.substr(i);
  if (phase_ == Phase::kElement) return Element(final, out, progressed);
  if (rest.empty()) return final ? EndAt(pos_) : Result::kNeedMore;
  switch (phase_) {
    case Phase::kOpen:
      if (rest[0] != '[' && rest[0] != '{') return Result::kMalformed;
      bracketed_ = rest[0] == '[';
      pos_ = bracketed_ ? i + 1 : i;
      phase_ = Phase::kElement;
      break;
    case Phase::kAfterElement:  // no "]": the closing tag may follow directly
      phase_ = NextElement(i, rest) ? Phase::kElement : Phase::kClose;
      break;
    case Phase::kClose:
      return ClosingTag(i, rest, final);
    case Phase::kElement:
      break;
  }
  *progressed = true;
  return Result::kNeedMore;
}

Result ToolCallArrayParser::Element(bool final, std::vector<ToolCallDelta>* out, bool* progressed) {
  if (!element_) {
    size_t i = SkipWs(buf_, pos_);
    if (i == buf_.size()) return final ? EndAt(pos_) : Result::kNeedMore;
    if (buf_[i] != '{') return EndAt(pos_);  // e.g. "[]" or a trailing comma: no call here
    element_ = std::make_unique<ToolCallBlockParser>(tools_, CallIndex());
    element_start_ = i;
  }
  size_t fed = element_start_ + element_->text().size();
  Result r = element_->Feed(std::string_view(buf_).substr(fed), final, out);
  if (r == Result::kNeedMore) return r;
  size_t start = element_start_;
  size_t consumed = element_->text().size() - element_->leftover().size();
  element_.reset();
  if (r == Result::kMalformed) return EndAt(start);
  ++n_calls_;
  pos_ = start + consumed;
  phase_ = Phase::kAfterElement;
  *progressed = true;
  return Result::kNeedMore;
}

}  // namespace rw::chat
