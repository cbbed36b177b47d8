// Incremental parser of Kimi's tool-call section (Kimi K2 / Kimi Linear chat template; llama.cpp v0.5.0's
// Kimi K2 parser reads the same), the text after "<|tool_calls_section_begin|>":
//   <|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{"city": "Oslo"}<|tool_call_end|>
//   <|tool_call_begin|>functions.search:1<|tool_call_argument_begin|>{...}<|tool_call_end|>
//   <|tool_calls_section_end|>
// The call id is "functions.NAME:INDEX"; the name is what lies between the prefix and the last ':' (an id
// without the prefix or the index gives its whole text). A call's first fragment carries its name as soon as
// <|tool_call_argument_begin|> is read; its arguments follow in one fragment at <|tool_call_end|>, as compact
// JSON when they parse as a JSON object (keys in the model's order), else the model's text ("{}" when empty).
// Call k gets index first_index + k. Before the first call is named, anything unexpected makes the section
// malformed (content); after it, the section ends at the first thing that is not a call, and the end of
// output closes an open call with its arguments so far.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "chat/tool_call_list.h"

namespace rw::chat {

class KimiCallsParser : public ToolCallList {
 public:
  using ToolCallList::ToolCallList;  // (first_index, close_tag)

 private:
  enum class Phase { kCall, kId, kArgs };
  Result Step(bool final, std::vector<ToolCallDelta>* out, bool* progressed) override;
  Result EndOfOutput(std::vector<ToolCallDelta>* out) override;
  void Arguments(std::string_view text, std::vector<ToolCallDelta>* out);

  Phase phase_ = Phase::kCall;
};

// "functions.NAME:3" -> "NAME".
std::string KimiCallName(std::string_view id);

}  // namespace rw::chat
