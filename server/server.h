// The HTTP server: OpenAI-compatible and llama-server compatible endpoints over one engine.
// It listens before the model is loaded (every endpoint but /health answers 503 until SetBackend).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "base/expected.h"
#include "engine/engine.h"
#include "server/backend.h"
#include "server/metrics.h"

namespace rw::server {

struct ServerConfig {
  std::string host = "127.0.0.1";
  int port = 8080;                    // 0: any free port (see Server::port())
  std::string api_key;                // "" = no authentication
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
