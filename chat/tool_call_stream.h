// Incremental parser of one tool-call block: the text after "<tool_call>", in either format the Qwen family
// writes, emitting OpenAI-style fragments as the text arrives:
//   XML (Qwen3.5, Qwen3-Coder):
//   <function=NAME>\n<parameter=P>\nVALUE\n</parameter>\n...</function>\n</tool_call> Hermes JSON (Qwen3,
//   Qwen3-2507, Qwen3-Next):  {"name": NAME, "arguments": {...}}</tool_call>
// The first fragment of a call carries its name (and arguments ""); the following ones carry argument text.
// The concatenated argument text is a JSON object: for XML it is built from the parameters (values typed by
// the tool's schema, string values streamed as they are written); for JSON it is the model's own text of the
// "arguments" value (a string holding JSON is unwrapped).
//
// Commitment: a block is "committed" once its name is known and its structure confirmed (XML: the first
// <parameter= or </function> after <function=NAME>; JSON: the arguments value starts, or the object ends,
// with a name). Before that, anything unexpected makes the block malformed (the caller turns it into
// content). After it, the call is always completed: a missing closing tag, or the end of generation inside a
// value, closes the call with what was written (open JSON strings and brackets are closed).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace rw::chat {

struct ToolCallDelta {
  size_t index = 0;       // position among this message's tool calls
  std::string name;       // set on a call's first fragment only
  std::string arguments;  // argument text to append
};

// A tool-call block after its opening tag, parsed incrementally: ToolCallBlockParser (one call, the Qwen
// family's <tool_call> bodies) or ToolCallArrayParser (chat/tool_call_array.h, a JSON array of calls).
class ToolCallBlock {
 public:
  enum class Result { kNeedMore, kDone, kMalformed };
  virtual ~ToolCallBlock() = default;
  // Appends text (what follows the opening tag) and parses as far as possible. `final`: no more text will
  // come. kDone: the block ended; leftover() is the text after it. kMalformed: the block is content after
  // all.
  Result Feed(std::string_view text, bool final, std::vector<ToolCallDelta>* out);
  // Everything fed so far (for the malformed fallback).
  const std::string& text() const { return buf_; }
  std::string leftover() const { return buf_.substr(pos_); }

 protected:
  // One parsing step from pos_; sets *progressed when it consumed text or changed state.
  virtual Result Step(bool final, std::vector<ToolCallDelta>* out, bool* progressed) = 0;
  // The output ended where no step can progress: kDone (closing what is open) or kMalformed.
  virtual Result EndOfOutput(std::vector<ToolCallDelta>* out) = 0;

  std::string buf_;  // the block text fed so far
  size_t pos_ = 0;   // parsed up to here
};

class ToolCallBlockParser : public ToolCallBlock {
 public:
  // `tools`: the request's tools (OpenAI format) for parameter types; may be null. `index`: the call's index.
  ToolCallBlockParser(const nlohmann::ordered_json* tools, size_t index) : tools_(tools), index_(index) {}

  // Feed() gives kMalformed only before commitment.
  bool committed() const { return committed_; }

 private:
  enum class Phase {
    kDetect,
    kXmlName,
    kXmlAfterName,
    kXmlParams,
    kXmlValue,
    kJsonKey,
    kJsonColon,
    kJsonValue,
    kJsonArgs,
    kJsonAfterValue,
    kEnd,
  };
  Result Step(bool final, std::vector<ToolCallDelta>* out, bool* progressed) override;
  Result EndOfOutput(std::vector<ToolCallDelta>* out) override;
  Result XmlValue(bool final, std::vector<ToolCallDelta>* out, bool* progressed);
  Result JsonArgs(bool final, std::vector<ToolCallDelta>* out, bool* progressed);
  void Emit(std::vector<ToolCallDelta>* out, std::string args);
  void EmitHeader(std::vector<ToolCallDelta>* out);
  void CloseCall(std::vector<ToolCallDelta>* out);
  // Closes the call (committed, or with a known name) and continues at `at` with the closing tag; false when
  // the block is malformed instead.
  bool EndCallAt(size_t at, std::vector<ToolCallDelta>* out);
  const nlohmann::ordered_json* ParamSchema(const std::string& param) const;

  const nlohmann::ordered_json* tools_;
  size_t index_;
  Phase phase_ = Phase::kDetect;
  bool xml_ = false;
  bool committed_ = false;
  bool closed_ = false;  // the arguments object was closed
  std::string name_;
  // XML
  size_t n_params_ = 0;
  bool value_started_ = false;  // the leading newline was handled
  bool value_string_ = false;   // streamed as a JSON string
  size_t value_begin_ = 0;      // offset in buf_
  size_t value_emitted_ = 0;    // string mode: bytes of the value already emitted
  std::string param_;
  // JSON
  std::string key_;
  bool have_args_ = false;
  std::string held_args_;   // arguments seen before the name
  std::string args_stack_;  // open brackets of the arguments value
  bool args_in_string_ = false, args_escape_ = false;
  bool args_raw_ = false;  // streaming a raw object/array
};

// JSON string escaping as nlohmann::json::dump writes it (UTF-8 kept), without the quotes.
std::string JsonEscape(std::string_view s);

}  // namespace rw::chat
