#include "chat/tool_call_kimi.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace rw::chat {
namespace {

constexpr std::string_view kCallBegin = "<|tool_call_begin|>";
constexpr std::string_view kArgBegin = "<|tool_call_argument_begin|>";
constexpr std::string_view kCallEnd = "<|tool_call_end|>";

}  // namespace

using Result = ToolCallBlock::Result;

std::string KimiCallName(std::string_view id) {
  std::string s = Trim(id);
  std::string_view v(s);
  if (StartsWith(v, "functions.")) v.remove_prefix(10);
  const size_t colon = v.rfind(':');
  if (colon != std::string_view::npos && colon + 1 < v.size() &&
      v.find_first_not_of("0123456789", colon + 1) == std::string_view::npos)
    v = v.substr(0, colon);
  return std::string(v);
}

void KimiCallsParser::Arguments(std::string_view text, std::vector<ToolCallDelta>* out) {
  const std::string raw = Trim(text);
  auto j = nlohmann::ordered_json::parse(raw, nullptr, /*allow_exceptions=*/false);
  ToolCallDelta d;
  d.index = CallIndex();
  d.arguments = raw.empty() ? "{}" : (!j.is_discarded() && j.is_object()) ? j.dump() : raw;
  out->push_back(std::move(d));
  ++n_calls_;
}

Result KimiCallsParser::Step(bool final, std::vector<ToolCallDelta>* out, bool* progressed) {
  std::string_view all(buf_);
  const size_t i = SkipWs(all, pos_);
  std::string_view rest = all.substr(i);
  switch (phase_) {
    case Phase::kCall:
      if (rest.empty()) return final ? EndAt(pos_) : Result::kNeedMore;
      if (StartsWith(rest, kCallBegin)) {
        pos_ = i + kCallBegin.size();
        phase_ = Phase::kId;
        break;
      }
      if (!final && MayBecome(rest, kCallBegin)) return Result::kNeedMore;
      return ClosingTag(i, rest, final);
    case Phase::kId: {
      const size_t at = all.find(kArgBegin, pos_);
      if (at == std::string_view::npos) {
        // An id is short and on one line; a call tag or a newline before the argument tag is not a call.
        const std::string_view id = all.substr(pos_);
        if (id.find('<') != std::string_view::npos && !MayBecome(id.substr(id.find('<')), kArgBegin))
          return EndAt(pos_ - kCallBegin.size());
        return final ? EndAt(pos_ - kCallBegin.size()) : Result::kNeedMore;
      }
      const std::string name = KimiCallName(all.substr(pos_, at - pos_));
      if (name.empty() || name.find_first_of("\n<") != std::string::npos) return EndAt(pos_ - kCallBegin.size());
      ToolCallDelta d;
      d.index = CallIndex();
      d.name = name;
      out->push_back(std::move(d));
      pos_ = at + kArgBegin.size();
      phase_ = Phase::kArgs;
      break;
    }
    case Phase::kArgs: {
      // Lenient: the section's closing tag also ends the call's arguments.
      const size_t at = std::min(all.find(kCallEnd, pos_), all.find(close_tag_, pos_));
      if (at == std::string_view::npos) return Result::kNeedMore;  // the end of output closes it (EndOfOutput)
      Arguments(all.substr(pos_, at - pos_), out);
      pos_ = StartsWith(all.substr(at), kCallEnd) ? at + kCallEnd.size() : at;
      phase_ = Phase::kCall;
      break;
    }
  }
  *progressed = true;
  return Result::kNeedMore;
}

Result KimiCallsParser::EndOfOutput(std::vector<ToolCallDelta>* out) {
  if (phase_ == Phase::kArgs) {  // named: close it with what was written
    Arguments(std::string_view(buf_).substr(pos_), out);
    pos_ = buf_.size();
    return Result::kDone;
  }
  return EndAt(phase_ == Phase::kId ? pos_ - kCallBegin.size() : pos_);
}

}  // namespace rw::chat
