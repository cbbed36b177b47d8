// Grammars that force tool calls (tool_choice "required" or a named function): the model's tool-call format
// with each function's name and its parameters' schemas, so the chat output parser always finds well-formed
// calls.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "base/expected.h"

namespace rw::grammar {

enum class ToolCallFormat {
  kQwenXml,     // <tool_call>\n<function=NAME>\n<parameter=P>\nVALUE\n</parameter>\n</function>\n</tool_call>
  kHermesJson,  // <tool_call>\n{"name": "NAME", "arguments": {...}}\n</tool_call>
  kNemotronArray,  // <TOOLCALL>[{"name": "NAME", "arguments": {...}}, ...]</TOOLCALL> (Nemotron Nano v2)
  kLfm2Pythonic,   // <|tool_call_start|>[NAME(KEY=VALUE, ...), ...]<|tool_call_end|> (LFM2; JSON-spelled values)
  kKimi,  // <|tool_calls_section_begin|>(<|tool_call_begin|>functions.NAME:I<|tool_call_argument_begin|>{...}
          // <|tool_call_end|>)+<|tool_calls_section_end|> (Kimi K2, Kimi Linear)
};

struct ToolGrammarOptions {
  ToolCallFormat format = ToolCallFormat::kQwenXml;
  bool thinking_open = false;  // the prompt ends inside <think>: reasoning and </think> come first
  bool parallel = true;        // one or more calls (false: exactly one)
  std::string function;        // only this function ("" = any of the tools)
};

// `tools`: OpenAI tools array ({"type":"function","function":{"name","parameters"}}). Errors: an unknown
// function name, a parameter schema the JSON-schema grammar does not support.
Expected<std::string> ToolCallGbnf(const nlohmann::ordered_json& tools, const ToolGrammarOptions& options);

// A grammar whose root comes after a reasoning block: "...</think>" (the prompt opened <think>), then
// whitespace, then `gbnf`'s root. `gbnf` must define `root` on a line of its own and never refer to it (as
// the JSON-schema and tool grammars do).
std::string AfterReasoning(const std::string& gbnf);

}  // namespace rw::grammar
