// Which tool-call format a chat template teaches its model, read from the template's own text:
//   kQwenXml <tool_call>\n<function=NAME>\n<parameter=P>\nVALUE\n</parameter>\n</function>\n</tool_call>
//                  (Qwen3.5, Qwen3-Coder, Nemotron 3 Nano)
//   kHermesJson    <tool_call>\n{"name": NAME, "arguments": {...}}\n</tool_call>
//                  (Qwen3, Qwen3-2507, Qwen3-Next, Granite 4.0; the default)
//   kNemotronArray <TOOLCALL>[{"name": NAME, "arguments": {...}}, ...]</TOOLCALL>  (Nemotron Nano v2)
//   kLfm2Pythonic  <|tool_call_start|>[NAME(ARG=VALUE, ...), ...]<|tool_call_end|>  (LFM2: Python-style calls;
//                  its template names only <|tool_list_start|>, as llama.cpp's is_lfm2_template checks)
//   kKimi          <|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:I<|tool_call_argument_begin|>
//                  {...}<|tool_call_end|>...<|tool_calls_section_end|>  (Kimi K2, Kimi Linear)
// The output parser reads both <tool_call> bodies whichever of the first two is selected (it detects the
// body); the format matters for the tags it looks for and for the grammar of forced calls.
#pragma once

#include <string_view>

namespace rw::chat {

enum class ToolCallFormat { kQwenXml, kHermesJson, kNemotronArray, kLfm2Pythonic, kKimi };

// `text`: a template's source (or a prompt it rendered with tools: it contains the same instructions).
ToolCallFormat DetectToolCallFormat(std::string_view text);

struct ToolCallTags {
  std::string_view open;
  std::string_view close;
};
ToolCallTags TagsOf(ToolCallFormat format);

const char* ToolCallFormatName(ToolCallFormat format);

}  // namespace rw::chat
