// Model output -> OpenAI message parts, for the Qwen3.5 / Qwen3-Coder conventions (and the other formats of
// chat/tool_format.h: Nemotron Nano v2's <TOOLCALL>[...]</TOOLCALL>, LFM2's Python-style
// <|tool_call_start|>[f(a=1)]<|tool_call_end|>, selected by ParserOptions::format):
//   [<think>] reasoning </think> content <tool_call>\n<function=NAME>\n<parameter=P>\nVALUE\n</parameter>\n
//   </function>\n</tool_call> ...
//   or, inside the same <tool_call> tags, Hermes JSON {"name": ..., "arguments": {...}} (Qwen3, Qwen3-Next);
//   several calls in a row are parallel calls.
// Streaming: Feed() takes text deltas and returns what can be emitted now; a possible tag prefix at the end
// of the text is held back, never emitted as content. Tool calls stream as OpenAI streams them: a first
// fragment with the name, then argument text as it is written (chat/tool_call_stream.h). A block that is
// malformed before its name and structure are known is emitted as plain content, never an error.
// Non-streaming: ParseOutput() = Feed(all) + Finish(). Splitting the text anywhere gives the same result.
//
// Whitespace: reasoning is trimmed; content loses its leading whitespace after </think> and the whitespace
// right before a tool call (the template re-renders it trimmed anyway); other whitespace is kept.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "chat/tool_call_stream.h"
#include "chat/tool_format.h"

namespace rw::chat {

struct ParserOptions {
  bool parse_reasoning = true;       // split <think>...</think> into reasoning_content
  bool starts_in_reasoning = false;  // the prompt ended inside an open <think> block (Qwen3.5, thinking on)
  // llama-server's deepseek-legacy: the reasoning also stays in the content, as "<think>" REASONING
  // "</think>" (the reasoning as reasoning_content has it; "</think>" only if the model closed it; nothing
  // for empty reasoning), followed by the answer.
  bool reasoning_in_content = false;
  bool parse_tool_calls = true;
  // The template's format (chat/tool_format.h): which tags delimit a call. kQwenXml and kHermesJson both read
  // either <tool_call> body; kNemotronArray reads <TOOLCALL>[...]</TOOLCALL>, kLfm2Pythonic
  // <|tool_call_start|>[NAME(ARG=VALUE, ...)]<|tool_call_end|>.
  ToolCallFormat format = ToolCallFormat::kQwenXml;
  // The request's tools (OpenAI format). A parameter whose schema type is string stays a string; integer,
  // number, boolean, object, array and null values are parsed from their JSON text, falling back to a string.
  nlohmann::ordered_json tools;
};

struct ParsedToolCall {
  std::string name;
  std::string arguments;  // JSON object text, keys in the order the model wrote them
};

struct ParserDelta {
  std::string content;
  std::string reasoning;
  std::vector<ToolCallDelta> tool_calls;  // fragments: a call's first one has its name
  bool empty() const { return content.empty() && reasoning.empty() && tool_calls.empty(); }
};

struct ParsedMessage {
  std::string content;
  std::string reasoning_content;
  std::vector<ParsedToolCall> tool_calls;
};

class OutputParser {
 public:
  explicit OutputParser(ParserOptions options);

  ParserDelta Feed(std::string_view text);
  // End of generation: flushes whatever was held back.
  ParserDelta Finish();
  // Everything emitted so far, accumulated.
  const ParsedMessage& message() const { return message_; }

 private:
  enum class State { kStart, kReasoning, kContent, kToolCall, kMalformedCall };

  void Process(bool final, ParserDelta* d);
  void EmitContent(std::string_view s, ParserDelta* d);
  void EmitReasoning(std::string_view s, ParserDelta* d);
  void EndReasoning(bool closed, ParserDelta* d);  // closed: the model wrote </think>
  void FlushPendingWs(ParserDelta* d);
  void BeginToolCall(size_t tag_at);
  void TakeCalls(std::vector<ToolCallDelta>& calls, ParserDelta* d);

  ParserOptions opt_;
  State state_;
  std::string buf_;             // unprocessed text
  std::string pending_ws_;      // trailing whitespace held until we know what follows
  std::string ws_before_call_;  // content whitespace dropped before a tool call (restored if malformed)
  bool content_started_ = false;
  bool reasoning_started_ = false;
  bool think_tag_in_content_ = false;  // reasoning_in_content: "<think>" was emitted as content
  ParsedMessage message_;
  std::string_view call_open_, call_close_;  // the format's tags
  std::unique_ptr<ToolCallBlock> block_;     // the tool-call block being parsed
  std::string malformed_;                    // a malformed block, up to its closing tag
};

ParsedMessage ParseOutput(std::string_view text, const ParserOptions& options);

// True when the rendered prompt leaves a <think> block open (its last "<think>" comes after its last
// "</think>"), i.e. generation starts inside reasoning: use it for ParserOptions::starts_in_reasoning.
bool PromptEndsInsideThinking(std::string_view prompt);

// The JSON value for one parameter given its schema type (see ParserOptions::tools).
nlohmann::ordered_json ParameterValue(const std::string& raw, const nlohmann::ordered_json* schema);

}  // namespace rw::chat
