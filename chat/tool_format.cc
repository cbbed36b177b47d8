#include "chat/tool_format.h"

namespace rw::chat {

ToolCallFormat DetectToolCallFormat(std::string_view text) {
  if (text.find("<TOOLCALL>") != std::string_view::npos) return ToolCallFormat::kNemotronArray;
  if (text.find("<function=") != std::string_view::npos) return ToolCallFormat::kQwenXml;
  return ToolCallFormat::kHermesJson;
}

ToolCallTags TagsOf(ToolCallFormat format) {
  if (format == ToolCallFormat::kNemotronArray) return {"<TOOLCALL>", "</TOOLCALL>"};
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
  }
  return "?";
}

}  // namespace rw::chat
