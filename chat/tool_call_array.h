// Incremental parser of a tool-call block holding a JSON array of calls, the text after "<TOOLCALL>" as
// Nemotron Nano v2 writes it:  [{"name": NAME, "arguments": {...}}, {...}]</TOOLCALL>
// Each element is parsed by a ToolCallBlockParser (the Hermes JSON object, arguments streamed as written), so
// the fragments are the same as for <tool_call> blocks; element k gets index first_index + k. Lenient where
// it costs nothing: a lone object without brackets is one call, a missing "]" or closing tag at the end of
// output is accepted. Before the first call is known, anything unexpected makes the block malformed
// (content); after it, the block ends there and the rest of the text is the caller's.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "chat/tool_call_list.h"
#include "chat/tool_call_stream.h"

namespace rw::chat {

class ToolCallArrayParser : public ToolCallList {
 public:
  ToolCallArrayParser(const nlohmann::ordered_json* tools, size_t first_index, std::string_view close_tag)
      : ToolCallList(first_index, close_tag), tools_(tools) {}

 private:
  enum class Phase { kOpen, kElement, kAfterElement, kClose };
  Result Step(bool final, std::vector<ToolCallDelta>* out, bool* progressed) override;
  // The end of output inside the array: what was parsed stands.
  Result EndOfOutput(std::vector<ToolCallDelta>*) override { return EndAt(buf_.size()); }
  Result Element(bool final, std::vector<ToolCallDelta>* out, bool* progressed);

  const nlohmann::ordered_json* tools_;
  Phase phase_ = Phase::kOpen;
  std::unique_ptr<ToolCallBlockParser> element_;  // the element being parsed
  size_t element_start_ = 0;                      // offset in buf_ of the element's text
};

}  // namespace rw::chat
