#include "chat/tool_format.h"

namespace rw::chat {

ToolCallFormat DetectToolCallFormat(std::string_view text) {
  if (text.find("<TOOLCALL>") != std::string_view::npos) return ToolCallFormat::kNemotronArray;
  if (text.find("<|tool_calls_section_begin|>") != std::string_view::npos) return ToolCallFormat::kKimi;
  if (text.find("<|tool_call_start|>") != std::string_view::npos ||
      text.find("<|tool_list_start|>") != std::string_view::npos)
    return ToolCallFormat::kLfm2Pythonic;
  if (text.find("<function=") != std::string_view::npos) return ToolCallFormat::kQwenXml;
  return ToolCallFormat::kHermesJson;
}

ToolCallTags TagsOf(ToolCallFormat format) {
  if (format == ToolCallFormat::kNemotronArray) return {"<TOOLCALL>", "</TOOLCALL>"};
  if (format == ToolCallFormat::kLfm2Pythonic) return {"<|tool_call_start|>", "<|tool_call_end|>"};
  if (format == ToolCallFormat::kKimi) return {"<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"};
  return {"<tool_call>", "</tool_call>"};
}

const char* ToolCallFormatName(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kQwenXml:
      return "qwen-xml";
    case ToolCallFormat::kHermesJson:
      return "hermes-json";
    case ToolCallFormat::kNemotronArray:
      return "nemotron-array";
    case ToolCallFormat::kLfm2Pythonic:
      return "lfm2-pythonic";
    case ToolCallFormat::kKimi:
      return "kimi";
  }
  return "?";
}

}  // namespace rw::chat
