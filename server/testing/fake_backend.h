// Scripted, deterministic stand-ins for the engine, tokenizer and chat formatter, for server tests and the
// fake_serve binary (which lets the e2e tests run before the real engine exists).
//
// Tokens: ids 0..255 are bytes; 256 <|im_start|>, 257 <|im_end|> (control, end of generation), 258 <think>,
// 259 </think>, 260 <tool_call>, 261 </tool_call>. The engine's answer depends on words in the prompt:
// CALL_TOOL -> a tool call, CALL_TOOLS_PARALLEL -> two, LONG -> thousands of tokens with a delay, UTF8 -> multi-byte characters split
// over tokens, STOPWORD -> text containing "STOP-HERE"; otherwise "Hello from the fake engine." (after a
// reasoning part when the prompt ends inside <think>).
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "server/backend.h"

namespace rw::server::testing {

class FakeCodec : public TextCodec {
 public:
  static constexpr int32_t kImStart = 256, kImEnd = 257, kThink = 258, kThinkEnd = 259, kToolCall = 260,
                           kToolCallEnd = 261, kVocab = 262;
  std::vector<int32_t> Encode(std::string_view text, bool parse_special, bool add_special) const override;
  std::string TokenToPiece(int32_t token, bool special) const override;
  bool IsEog(int32_t token) const override { return token == kImEnd; }
  int32_t VocabSize() const override { return kVocab; }
};

// ChatML with <think> handling; a message containing RAISE_EXCEPTION makes rendering fail like a template
// raise_exception().
class FakeChat : public ChatFormatter {
 public:
  Expected<RenderedChat> Render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                const ChatOptions& options) const override;
  std::unique_ptr<OutputParser> NewParser(const RenderedChat& rendered, const nlohmann::ordered_json& tools,
                                          const std::string& reasoning_format) const override;
};

class FakeEngine : public engine::Engine {
 public:
  struct Options {
    int32_t n_ctx = 4096;
    int32_t n_parallel = 4;
    int token_delay_us = 0;    // per generated token
    int long_delay_us = 2000;  // per token of a LONG answer
    // Given to every completion (the disk tier's write of its end state): what the server waits on.
    std::shared_ptr<const engine::PersistTicket> persist;
  };
  explicit FakeEngine(Options options);
  ~FakeEngine() override;

  Expected<uint64_t> Submit(engine::GenerationRequest request,
                            std::shared_ptr<engine::RequestSink> sink) override;
  void Cancel(uint64_t request_id) override;
  engine::EngineInfo Info() const override;
  std::vector<engine::SlotInfo> Slots() override;
  Expected<SlotFileResult> SaveSlot(int32_t slot, const std::string& filename) override;
  Expected<SlotFileResult> RestoreSlot(int32_t slot, const std::string& filename) override;
  Status EraseSlot(int32_t slot) override;
  std::string MetricsText() override;
  std::string CacheJson() override;

  // For tests.
  engine::GenerationRequest last_request();
  int64_t cancelled_count() const { return cancelled_count_.load(); }
  int64_t active() const { return active_.load(); }
  // Blocks until no request is running (or the timeout passes); true if idle.
  bool WaitIdle(int timeout_ms);

 private:
  void Run(uint64_t id, engine::GenerationRequest request, std::shared_ptr<engine::RequestSink> sink);

  Options options_;
  FakeCodec codec_;
  std::mutex mu_;
  std::condition_variable idle_cv_;
  std::vector<std::thread> threads_;
  std::set<uint64_t> cancelled_;
  std::set<std::string> saved_;
  std::vector<int32_t> previous_prompt_;
  engine::GenerationRequest last_;
  uint64_t next_id_ = 1;
  std::atomic<int64_t> active_{0}, cancelled_count_{0}, submitted_{0};
};

// A complete fake backend.
struct FakeBackend {
  explicit FakeBackend(FakeEngine::Options options = {}) : engine(options) {}
  FakeEngine engine;
  FakeCodec codec;
  FakeChat chat;
  Backend backend() { return {&engine, &codec, &chat}; }
};

}  // namespace rw::server::testing
