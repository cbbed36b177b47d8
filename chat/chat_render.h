// Chat rendering: OpenAI-style messages + tools -> prompt text, plus where each message starts in it.
//
// Message spans are found by watching the template run (jinja::LoopObserver): the top-level for loop that
// visits the caller's message objects (by identity, so `messages[::-1]` or `messages[1:]` still count) and
// writes the most output is the conversation loop; message i starts at the output length when that loop
// begins the iteration for message i. This is exact for the Qwen family, where the template rewrites earlier
// turns (strips old reasoning) and merges tool results into one user turn: each span covers exactly the bytes
// the template emitted for that message in this rendering. Rules: a message the loop did not visit, or whose
// iteration wrote nothing, gets an empty span at the next message's start; if message 0 is empty that way
// (a system message rendered before the loop, e.g. inside the tools header), it starts at 0. The generation
// prompt starts where the conversation loop ended. Templates without such a loop fall back to rendering each
// prefix of the conversation and taking the common prefix with the full text (spans.exact = false).
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "base/expected.h"
#include "chat/jinja.h"

namespace rw::chat {

struct RenderOptions {
  bool add_generation_prompt = true;
  bool enable_thinking = true;  // llama.cpp's default; the Qwen3.5 template only acts on an explicit false
  // Extra template variables (llama-server's chat_template_kwargs); they override the fields above.
  nlohmann::ordered_json chat_template_kwargs = nlohmann::ordered_json::object();
  std::string bos_token;
  std::string eos_token;
  // llama.cpp compatibility: tools become {"type": "function", "function": {"name", "description",
  // "parameters"}}, and tool-call arguments given as JSON strings (the OpenAI wire format) become objects.
  bool normalize_tools = true;
  bool parse_tool_arguments = true;
};

struct MessageSpans {
  std::vector<size_t> message_start;  // [n_messages] byte offset in the text where message i starts
  size_t generation_start = 0;        // byte offset where the generation prompt starts (text size if none)
  bool exact = true;                  // false when found by the prefix-rendering fallback
};

struct RenderedChat {
  std::string text;
  MessageSpans spans;
};

// `messages`: array of {role, content, reasoning_content?, tool_calls?, ...}; `tools`: array or null.
// Use nlohmann::ordered_json so that tool schemas and arguments keep the client's key order (the prompt
// depends on it). Template errors (including raise_exception) come back as InvalidArgument.
Expected<RenderedChat> RenderChat(const Template& tmpl, const nlohmann::ordered_json& messages,
                                  const nlohmann::ordered_json& tools, const RenderOptions& options);

// The same spans in tokens. `token_offsets[j]` is the byte offset where token j starts (ascending, first 0);
// `text_size` the rendered text's length. A byte offset maps to the token that contains it (so tokens before
// that index lie wholly before the offset); an offset at the text's end maps to the token count.
struct TokenSpans {
  std::vector<size_t> message_start;  // [n_messages] token index
  std::vector<bool> aligned;          // [n_messages] the message starts exactly at a token boundary
  size_t generation_start = 0;
  bool generation_aligned = true;
};
TokenSpans MapSpansToTokens(const MessageSpans& spans, std::span<const size_t> token_offsets,
                            size_t text_size);

// llama.cpp's tool normalisation (see RenderOptions::normalize_tools); exposed for the server and tests.
nlohmann::ordered_json NormalizeTools(const nlohmann::ordered_json& tools);

}  // namespace rw::chat

namespace rw::chat {

// The template a model uses: the file `template_file` when given (llama-server's --chat-template-file
// overrides the GGUF's), else `gguf_template` (tokenizer.chat_template; empty when the model has none).
Expected<Template> SelectTemplate(const std::string& gguf_template, const std::string& template_file);

}  // namespace rw::chat
