// The HTTP server: OpenAI-compatible and llama-server compatible endpoints over one engine.
// It listens before the model is loaded (every endpoint but /health answers 503 until SetBackend).
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/expected.h"
#include "engine/engine.h"
#include "server/backend.h"
#include "server/metrics.h"
#include "server/request_limits.h"

namespace rw::server {

struct ServerConfig {
  std::string host = "127.0.0.1";
  int port = 8080;                    // 0: any free port (see Server::port())
  // API keys (docs/security.md): none = no authentication. `api_key` may hold several, comma-separated
  // (llama-server's --api-key); `api_keys` adds more (--api-key-file, one per line).
  std::string api_key;
  std::vector<std::string> api_keys;
  std::string model_name = "rewind";  // reported by /v1/models and in responses
  int http_threads = 0;               // 0: derived from the engine's slots (at least 32)
  bool log_requests = true;           // one log line per request
  // Sampling of requests that do not say (llama-server's defaults; rewind serve's --temp, --top-k, ... flags),
  // and the grammar of requests without a constraint of their own (--grammar / --grammar-file).
  engine::SamplingParams sampling_defaults = LlamaServerSamplingDefaults();
  int64_t default_seed = -1;  // seed of requests without one; -1: random per request

  static engine::SamplingParams LlamaServerSamplingDefaults() {
    engine::SamplingParams s;
    s.temperature = 0.8f;
    s.top_k = 40;
    s.top_p = 0.95f;
    s.min_p = 0.05f;
    return s;
  }
  bool webui = true;                  // serve the built-in web page at / (docs/webui.md)
  int timeout_s = 60;                 // HTTP read/write timeout
  int32_t default_n_predict = -1;     // max tokens when a request gives none (-1: no limit)
  // llama-server compatible defaults for chat requests.
  nlohmann::ordered_json chat_template_kwargs =
      nlohmann::ordered_json::object();  // --chat-template-kwargs, under each request's own
  std::string reasoning_format = "auto";  // none | deepseek | deepseek-legacy | auto
  int reasoning_budget = -1;              // -1 unrestricted, 0 thinking off (llama-server semantics)
  std::string reasoning_budget_message;   // put before the forced end of thinking when the budget runs out
  bool cors = true;                       // Access-Control-* headers for browser clients
  bool props_endpoint = false;            // POST /props allowed (llama-server's --props)
  bool slots_endpoint = true;             // GET /slots (llama-server's --slots / --no-slots)
  bool metrics_endpoint = true;           // GET /metrics (llama-server's --metrics)
  int responses_max = 256;                // Responses API: stored responses kept for previous_response_id,
  int64_t responses_max_bytes = int64_t{64} << 20;  //   their bytes (JSON text) together,
  int responses_ttl_s = 3600;             //   and for how long
  RequestLimits limits;                   // bounds on what a request may ask for (--max-* flags)
  // A finished response's last event waits up to this many milliseconds for its end state to be on disk
  // (--cache-disk-wait; docs/checkpoints.md, "Disk tier"); 0: it does not wait.
  int64_t cache_disk_wait_ms = 1000;
};

class Server {
 public:
  explicit Server(ServerConfig config);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds the listening socket. Returns the port (useful with port 0).
  Expected<int> Bind();
  // Serves until Stop(); call after Bind().
  void Run();
  void Stop();
  int port() const;

  // The model is loaded: requests are served from now on. `backend` must outlive the server.
  void SetBackend(const Backend& backend);
  // Loading failed: /health reports it, every other endpoint answers 503 with the message.
  void SetLoadFailed(const std::string& message);

  ServerMetrics& metrics();

  struct Impl;  // server_impl.h (internal to server/)

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace rw::server
