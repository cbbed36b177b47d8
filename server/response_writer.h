// The seam between the one generation runner (handlers_generate.cc: submit, poll, stream or collect, cancel
// on hang-up, metrics) and each API's wire shapes: OpenAI chat/completions, Anthropic Messages, OpenAI
// Responses, llama-server /completion. A writer turns generation progress into that API's SSE events or final
// body.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "server/api_error.h"
#include "server/generation.h"

namespace rw::server {

class ResponseWriter {
 public:
  virtual ~ResponseWriter() = default;
  // Streaming: what to send before any token (may be ""), for a chunk of progress, and at the end (the
  // error event included when the generation failed).
  virtual std::string StreamStart(const Generation& g) {
    (void)g;
    return "";
  }
  virtual std::string StreamChunk(const Generation& g, const GenerationChunk& c) = 0;
  virtual std::string StreamEnd(const Generation& g) = 0;
  // Non-streaming: the body of a successful answer; `total` is every chunk accumulated.
  virtual nlohmann::json Full(const Generation& g, const GenerationChunk& total) = 0;
  // An error in this API's shape.
  virtual nlohmann::json ErrorBody(const ApiError& e) const { return e.ToJson(); }
};

// Appends a chunk to a running total; tool-call fragments are merged into whole calls.
void Accumulate(GenerationChunk* total, GenerationChunk&& c);

// "event: NAME\ndata: JSON\n\n" (the named-event SSE form of the Anthropic and Responses APIs).
std::string NamedSse(const std::string& event, const nlohmann::json& data);

}  // namespace rw::server
