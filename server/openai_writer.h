// OpenAI chat.completion / text_completion shapes (POST /v1/chat/completions, /v1/completions).
#pragma once

#include <memory>
#include <string>

#include "server/response_writer.h"

namespace rw::server {

struct OpenAiWriterOptions {
  bool chat = true;  // chat.completion vs text_completion
  bool include_usage = false;
  bool logprobs = false;
  std::string model;
  int32_t prompt_tokens = 0;
};

std::unique_ptr<ResponseWriter> NewOpenAiWriter(OpenAiWriterOptions options);

// llama-server's native POST /completion shape (content, stop, tokens_predicted, ...).
// `n_ctx`: the context (for `truncated`); `probs`: the request asked for n_probs (completion_probabilities).
std::unique_ptr<ResponseWriter> NewLlamaCompletionWriter(std::string model, int32_t prompt_tokens, int32_t n_ctx,
                                                         bool probs);

}  // namespace rw::server
