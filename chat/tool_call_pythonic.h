// Incremental parser of a tool-call block holding Python-style calls, the text after "<|tool_call_start|>" as
// LFM2 writes it (llama.cpp v0.5.0 common/parsers/lfm2.cpp):
//   [get_weather(city="Oslo", days=2), get_time(tz='CET')]<|tool_call_end|>
// Keyword arguments only; values are Python literals (strings in ' or " with escapes, numbers, True / False /
// None, lists, tuples, dicts) or their JSON spellings (true / false / null), converted to JSON. A call's
// first fragment carries its name as soon as "NAME(" is read; each argument follows as compact JSON text
// ({"city":"Oslo","days":2}) once its value is complete. Call k gets index first_index + k.
// Lenient where it costs nothing: a lone call without brackets, a trailing comma, a missing "]" or closing
// tag at the end of output. Before the first call is named, anything unexpected makes the block malformed
// (content); after it, a call ends at the first thing that is not an argument and the block ends there (the
// rest is the caller's text); the end of output closes an open call with the arguments complete so far.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "chat/tool_call_list.h"

namespace rw::chat {

class PythonicCallsParser : public ToolCallList {
 public:
  using ToolCallList::ToolCallList;  // (first_index, close_tag)

 private:
  enum class Phase { kOpen, kCall, kArgs, kAfterCall, kClose };
  Result Step(bool final, std::vector<ToolCallDelta>* out, bool* progressed) override;
  Result EndOfOutput(std::vector<ToolCallDelta>* out) override;
  Result CallName(size_t i, bool final, std::vector<ToolCallDelta>* out, bool* progressed);
  Result Argument(size_t i, std::vector<ToolCallDelta>* out, bool* progressed);
  // Closes the open call ("}" or "{}") and counts it.
  void CloseCall(std::vector<ToolCallDelta>* out);

  Phase phase_ = Phase::kOpen;
  size_t n_args_ = 0;  // arguments of the open call emitted so far
};

// One Python literal (or JSON literal) at s[*pos] (leading whitespace allowed) as JSON. kIncomplete: the text
// ends inside it (more may come). On kOk *pos is just past the literal.
enum class PyLiteral { kOk, kIncomplete, kBad };
PyLiteral ParsePythonLiteral(std::string_view s, size_t* pos, nlohmann::ordered_json* out);

}  // namespace rw::chat
