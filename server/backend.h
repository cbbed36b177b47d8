// What the HTTP layer needs besides the engine: a tokenizer, a chat formatter and an output parser, behind
// small interfaces so that the server is tested with scripted fakes and wired to tokenizer/ and chat/ in
// apps/.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/expected.h"
#include "engine/engine.h"
#include "grammar/tool_grammar.h"

namespace rw::vision {
class ImagePipeline;
}

namespace rw::server {

class TextCodec {
 public:
  virtual ~TextCodec() = default;
  virtual std::vector<int32_t> Encode(std::string_view text, bool parse_special, bool add_special) const = 0;
  // Raw bytes of one token (may be a partial UTF-8 character). `special`: render control tokens.
  virtual std::string TokenToPiece(int32_t token, bool special) const = 0;
  virtual bool IsEog(int32_t token) const = 0;
  virtual int32_t VocabSize() const = 0;
};

struct ChatOptions {
  bool add_generation_prompt = true;
  nlohmann::ordered_json kwargs =
      nlohmann::ordered_json::object();  // chat_template_kwargs (enable_thinking, ...)
};

struct RenderedChat {
  std::string prompt;
  std::vector<size_t> message_offsets;  // byte offset where each message starts in `prompt` (may be empty)
  size_t generation_offset = 0;         // byte offset of the generation header (prompt size if none)
  bool thinking_open = false;           // the prompt ends inside an open <think> block
  // The tool-call format the template teaches (forced calls are constrained to it);
  // chat::DetectToolCallFormat.
  grammar::ToolCallFormat tool_format = grammar::ToolCallFormat::kHermesJson;
};

// One tool call as OpenAI reports it (`arguments` is JSON text), or a fragment of one while streaming: a
// call's first fragment has its name, later fragments of the same index append argument text.
struct ToolCall {
  std::string id;         // "" = assigned by the server
  std::string name;       // set on a call's first fragment only
  std::string arguments;  // argument text (to append, for later fragments)
  int index = 0;          // position among the message's tool calls
};

// Text split by the output parser since the previous Push.
struct ParsedDelta {
  std::string reasoning;
  std::string content;
  std::vector<ToolCall> tool_calls;  // call fragments, in order
  bool empty() const { return reasoning.empty() && content.empty() && tool_calls.empty(); }
};

// Streaming parser of generated text (valid UTF-8 pieces in order) into reasoning, content and tool calls.
class OutputParser {
 public:
  virtual ~OutputParser() = default;
  virtual ParsedDelta Push(std::string_view text) = 0;
  // End of generation: flushes whatever was held back (an unterminated tool call becomes content).
  virtual ParsedDelta Finish() = 0;
};

class ChatFormatter {
 public:
  virtual ~ChatFormatter() = default;
  // messages/tools as validated by request_parse. Template errors are InvalidArgument with the template's
  // text.
  virtual Expected<RenderedChat> Render(const nlohmann::ordered_json& messages,
                                        const nlohmann::ordered_json& tools,
                                        const ChatOptions& options) const = 0;
  // `tools`: the request's tools (null: no tool-call parsing).
  // `reasoning_format`: none (thoughts stay in the content) | deepseek | auto (split into reasoning) |
  // deepseek-legacy (split into reasoning, and kept in the content as <think>...</think> as well).
  virtual std::unique_ptr<OutputParser> NewParser(const RenderedChat& rendered,
                                                  const nlohmann::ordered_json& tools,
                                                  const std::string& reasoning_format) const = 0;
};

// Everything the server talks to once the model is loaded. Not owned.
struct Backend {
  engine::Engine* engine = nullptr;
  const TextCodec* codec = nullptr;
  const ChatFormatter* chat = nullptr;
  vision::ImagePipeline* images = nullptr;  // --mmproj: image input (null: requests with images get a 400)
};

}  // namespace rw::server
