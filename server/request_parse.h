// Request parsing and validation: pure functions from a request body to a typed request or an ApiError.
// No I/O, no engine, no exceptions escape: the fuzz target and the random-body unit test call these directly.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "server/api_error.h"
#include "server/sampling_parse.h"

namespace rw::server {

template <typename T>
using ParseResult = std::variant<T, ApiError>;

// Fields shared by chat and text completions.
struct GenerationParams {
  int32_t max_tokens = -1;  // -1: until end of generation or context
  SamplingRequest sampling;  // sampling_parse.h: the server's defaults, overridden by the request
  std::optional<uint64_t> seed;   // none: a random seed per request
  std::vector<std::string> stop;  // non-empty strings, at most --max-stop of at most --max-stop-length bytes
  bool logprobs = false;
  int32_t top_logprobs = 0;  // 0..--max-top-logprobs (at most 20)
  bool ignore_eos = false;
  bool cache_prompt = true;
  int32_t slot_id = -1;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
};

struct ChatRequest {
  std::string model;
  nlohmann::ordered_json messages;   // validated array; tool-call arguments given as JSON text become objects
  nlohmann::ordered_json tools;      // null or a non-empty array of {"type":"function","function":{name,...}}
  std::string tool_choice = "auto";  // auto | none | required | function:<name>
  nlohmann::ordered_json template_kwargs =
      nlohmann::ordered_json::object();  // chat_template_kwargs (+ top-level enable_thinking)
  bool add_generation_prompt = true;     // /apply-template only
  std::string reasoning_format;          // llama-server's per-request reasoning_format ("" = server's)
  int32_t reasoning_budget = -2;         // reasoning_budget_tokens / thinking_budget_tokens (-2 = server's)
  std::optional<std::string> reasoning_budget_message;  // llama-server's per-request one (unset = server's)
  GenerationParams gen;
  // `checkpoints`: message indices (ints, negative from the end) and token positions ({"position": N}).
  std::vector<int32_t> checkpoint_messages;
  std::vector<int32_t> checkpoint_positions;
};

struct CompletionRequest {
  std::string model;
  std::string prompt_text;             // when the prompt is text
  std::vector<int32_t> prompt_tokens;  // when the prompt is token ids
  bool prompt_is_tokens = false;
  GenerationParams gen;
  std::vector<int32_t> checkpoint_positions;
};

struct TokenizeRequest {
  std::string content;
  bool add_special = false;
  bool parse_special = true;
  bool with_pieces = false;
};

struct DetokenizeRequest {
  std::vector<int32_t> tokens;
};

struct SlotActionRequest {
  int32_t slot = 0;
  std::string action;    // save | restore | erase
  std::string filename;  // save/restore: a plain file name (no directories)
};

// What every API's parser starts from: the sampling values of fields a request leaves out (the server's
// --temp, --top-k, ..., --grammar flags) and the bounds on what a request may ask for. Chat completions,
// completions, Anthropic messages and the Responses API all parse through ParseGeneration with these.
struct ParseOptions {
  ParseOptions(engine::SamplingParams d = engine::SamplingParams(), RequestLimits l = RequestLimits())
      : defaults(std::move(d)), limits(l) {}
  engine::SamplingParams defaults;
  RequestLimits limits;
};

// Parses a JSON body; malformed JSON (including invalid UTF-8), non-object bodies and bodies past the JSON
// limits (values, object members, depth; checked by a scan before the DOM is built) are 400.
ParseResult<nlohmann::ordered_json> ParseJsonBody(std::string_view body,
                                                  const RequestLimits& limits = RequestLimits());

ParseResult<ChatRequest> ParseChatRequest(const nlohmann::ordered_json& body,
                                          const ParseOptions& options = ParseOptions());
// /apply-template: the chat fields only (messages, tools, chat_template_kwargs, add_generation_prompt).
ParseResult<ChatRequest> ParseApplyTemplateRequest(const nlohmann::ordered_json& body,
                                                   const RequestLimits& limits = RequestLimits());
ParseResult<CompletionRequest> ParseCompletionRequest(const nlohmann::ordered_json& body,
                                                      const ParseOptions& options = ParseOptions());
ParseResult<TokenizeRequest> ParseTokenizeRequest(const nlohmann::ordered_json& body);
ParseResult<DetokenizeRequest> ParseDetokenizeRequest(const nlohmann::ordered_json& body);
// slot_id from the path, action from the query, body may be empty for erase.
ParseResult<SlotActionRequest> ParseSlotAction(std::string_view slot_id, std::string_view action,
                                               std::string_view body);

// obj[key] when obj is an object holding a string there, else `fallback` (never throws, unlike json::value).
std::string StringField(const nlohmann::ordered_json& obj, const char* key, const std::string& fallback);

// True if `s` is valid UTF-8 (no overlong forms, no surrogates).
bool IsValidUtf8(std::string_view s);

}  // namespace rw::server
