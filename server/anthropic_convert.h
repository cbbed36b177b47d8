// Anthropic Messages API requests -> the server's chat request (pure functions, no I/O), and errors in
// Anthropic's shape. The conversion writes an OpenAI chat body and validates it with ParseChatRequest, so
// every rule of the chat endpoint (roles, tools, limits) holds here too.
//   system (string | text blocks)        -> a system message
//   text blocks                          -> content parts;  thinking blocks -> reasoning_content
//   tool_use blocks (assistant)          -> tool_calls;      tool_result blocks (user) -> tool messages
//   tools [{name, description, input_schema}] -> function tools; tool_choice auto|any|tool|none
//   thinking {type: enabled|disabled}    -> chat_template_kwargs.enable_thinking
//   max_tokens, stop_sequences, temperature, top_p, top_k, stream -> the generation fields
// cache_control on a system, tool or message block becomes a cache breakpoint: a checkpoint hint at the end
// of that block in the rendered prompt (see CacheBreakpoint).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server/request_parse.h"

namespace rw::server {

struct CacheBreakpoint {
  // Index of the chat message holding the block; -1 for the tools (they render before the conversation).
  int message = -1;
  std::string text;  // the block's text; "" = the end of the message
};

struct AnthropicRequest {
  ChatRequest chat;
  std::vector<CacheBreakpoint> breakpoints;
};

// `count_tokens`: /v1/messages/count_tokens (max_tokens not required). `options`: the server's sampling
// defaults and limits, as for chat completions.
ParseResult<AnthropicRequest> ParseAnthropicRequest(const nlohmann::ordered_json& body, bool count_tokens,
                                                    const ParseOptions& options = ParseOptions());

// {"type": "error", "error": {"type", "message"}} with Anthropic's error types.
nlohmann::json AnthropicErrorJson(const ApiError& e);

// Anthropic stop_reason for a finish reason (stop, length, tool_calls) and whether a stop string matched.
std::string AnthropicStopReason(const std::string& finish_reason, bool stop_sequence);

// Byte offsets in `prompt` where each breakpoint's block ends. `message_offsets` are the rendered message
// starts, `generation_offset` where the generation prompt starts.
std::vector<size_t> BreakpointOffsets(const std::vector<CacheBreakpoint>& breakpoints,
                                      const std::string& prompt, const std::vector<size_t>& message_offsets,
                                      size_t generation_offset, bool has_system);

}  // namespace rw::server
