// Internal to server/: the state behind Server and the route handlers (split over handlers_*.cc).
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server/api_error.h"
#include "server/request_parse.h"
#include "server/response_writer.h"
#include "server/responses_store.h"
#include "server/server.h"

namespace rw::server {

// What a generation handler hands to the shared streaming / non-streaming runner.
struct PreparedGeneration {
  std::vector<int32_t> prompt;
  std::vector<int32_t> checkpoint_hints;
  int32_t generation_start = -1;  // token position of the chat's generation header (engine::GenerationRequest)
  GenerationParams gen;
  std::unique_ptr<OutputParser> parser;  // chat only
  std::unique_ptr<ResponseWriter> writer;
  ReasoningBudget reasoning_budget;  // chat only
  std::vector<engine::PromptImage> images;  // chat only: image spans of `prompt` (server/image_prompt.h)
};

// Byte offsets in a rendered chat where a client asked for checkpoints (Anthropic cache_control).
using ExtraHints = std::function<std::vector<size_t>(const RenderedChat&)>;

struct Server::Impl {
  explicit Impl(ServerConfig c);

  ServerConfig config;
  ParseOptions parse_options;     // config.sampling_defaults and config.limits, for every API's parser
  std::vector<std::string> keys;  // accepted API keys (config.api_key split at commas, then config.api_keys)
  httplib::Server http;
  ServerMetrics metrics;
  int bound_port = -1;

  enum class State { kLoading, kReady, kFailed };
  std::atomic<State> state{State::kLoading};
  std::string load_error;  // set before state = kFailed
  Backend backend;         // set before state = kReady
  engine::EngineInfo info;
  ResponseStore stored_responses;  // previous_response_id of the Responses API

  void Routes();
  bool Authorized(const httplib::Request& req) const;
  // The client a request comes from, for what the server keeps per client (stored responses): a digest of
  // the API key it presented; "" when the server has no keys (then every client is the same one).
  std::string ClientOf(const httplib::Request& req) const;

  // Responses.
  static void SendJson(httplib::Response& res, int status, const nlohmann::json& body);
  static void SendError(httplib::Response& res, const ApiError& error);

  // handlers_generate.cc
  void HandleChat(const httplib::Request& req, httplib::Response& res);
  void HandleCompletion(const httplib::Request& req, httplib::Response& res);
  void RunGeneration(const httplib::Request& req, httplib::Response& res, PreparedGeneration p);
  // Before a finished response's last event (the non-streamed body, the final SSE events): waits, on this HTTP
  // thread and at most config.cache_disk_wait_ms, until the disk tier has the response's end state in place
  // (engine::Completion::persist), so that an acknowledged answer survives a crash. Timeouts are counted in
  // /metrics and logged once per incident.
  void AwaitEndState(const Generation& g);
  std::atomic<bool> disk_wait_incident{false};  // the last wait timed out (logged at the start of the run)
  // Renders a chat request (server-wide template kwargs and reasoning format applied) into a prompt with its
  // checkpoint hints and output parser; the caller adds the writer.
  ParseResult<PreparedGeneration> PrepareChat(ChatRequest& r, const ExtraHints& extra_hints);

  // anthropic_messages.cc
  void HandleAnthropicMessages(const httplib::Request& req, httplib::Response& res);
  void HandleAnthropicCountTokens(const httplib::Request& req, httplib::Response& res);
  // responses_api.cc
  void HandleResponses(const httplib::Request& req, httplib::Response& res);
  // llama_native.cc
  void HandleProps(const httplib::Request& req, httplib::Response& res);
  void HandlePropsUpdate(const httplib::Request& req, httplib::Response& res);

  // handlers_misc.cc
  void HandleHealth(const httplib::Request& req, httplib::Response& res);
  void HandleModels(const httplib::Request& req, httplib::Response& res);
  void HandleMetrics(const httplib::Request& req, httplib::Response& res);
  void HandleTokenize(const httplib::Request& req, httplib::Response& res);
  void HandleDetokenize(const httplib::Request& req, httplib::Response& res);
  void HandleApplyTemplate(const httplib::Request& req, httplib::Response& res);
  void HandleSlots(const httplib::Request& req, httplib::Response& res);
  void HandleSlotAction(const httplib::Request& req, httplib::Response& res);
  void HandleCache(const httplib::Request& req, httplib::Response& res);

  // webui.cc: the built-in web page (unless --no-webui), its tree view of the cache, /props.
  void WebUiRoutes();
  void HandleCacheTree(const httplib::Request& req, httplib::Response& res);
};

// Byte offsets in `text` (sorted or not) -> token positions in `tokens` where a token starts exactly there.
// Offsets that fall inside a token are dropped.
std::vector<int32_t> OffsetsToTokenPositions(const TextCodec& codec, const std::vector<int32_t>& tokens,
                                             const std::vector<size_t>& offsets);

// Constant-time string comparison (API keys).
bool ConstantTimeEquals(const std::string& a, const std::string& b);

// Unwraps a parse result, or answers the request with its error (false).
template <typename T>
bool Take(ParseResult<T>& parsed, httplib::Response& res, T** out) {
  if (auto* e = std::get_if<ApiError>(&parsed)) {
    Server::Impl::SendError(res, *e);
    return false;
  }
  *out = &std::get<T>(parsed);
  return true;
}

}  // namespace rw::server
