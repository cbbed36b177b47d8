// A real Server over the fake backend on a free loopback port, for tests.
#pragma once

#include <httplib.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "server/server.h"
#include "server/testing/fake_backend.h"

namespace rw::server::testing {

class TestServer {
 public:
  explicit TestServer(FakeEngine::Options options = {}, ServerConfig config = {}, bool ready = true)
      : fake_(options) {
    config.host = "127.0.0.1";
    config.port = 0;
    config.log_requests = false;
    config.model_name = "test-model";
    server_ = std::make_unique<Server>(config);
    auto port = server_->Bind();
    if (!port.ok()) std::abort();
    port_ = *port;
    if (ready) server_->SetBackend(fake_.backend());
    thread_ = std::thread([this] { server_->Run(); });
    // Wait until it answers.
    for (int i = 0; i < 200; ++i) {
      httplib::Client c("127.0.0.1", port_);
      if (c.Get("/health")) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  ~TestServer() {
    server_->Stop();
    thread_.join();
    fake_.engine.WaitIdle(5000);
  }

  httplib::Client Client() const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(30);
    return c;
  }
  httplib::Result Post(const std::string& path, const nlohmann::json& body) const {
    return Client().Post(path.c_str(), body.dump(), "application/json");
  }
  httplib::Result PostRaw(const std::string& path, const std::string& body) const {
    return Client().Post(path.c_str(), body, "application/json");
  }
  Server& server() { return *server_; }
  FakeBackend& fake() { return fake_; }
  int port() const { return port_; }

 private:
  FakeBackend fake_;
  std::unique_ptr<Server> server_;
  int port_ = 0;
  std::thread thread_;
};

// Splits an SSE body into its data payloads (comments skipped).
inline std::vector<std::string> SseData(const std::string& body) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) end = body.size();
    std::string event = body.substr(pos, end - pos);
    if (event.rfind("data: ", 0) == 0) out.push_back(event.substr(6));
    pos = end + 2;
  }
  return out;
}

// Splits a named-event SSE body ("event: NAME\ndata: JSON\n\n", the Anthropic and Responses form) into
// (name, data) pairs.
inline std::vector<std::pair<std::string, nlohmann::json>> NamedSseEvents(const std::string& body) {
  std::vector<std::pair<std::string, nlohmann::json>> out;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) end = body.size();
    std::string ev = body.substr(pos, end - pos);
    pos = end + 2;
    if (ev.rfind("event: ", 0) != 0) continue;
    size_t nl = ev.find('\n');
    if (nl == std::string::npos || ev.compare(nl + 1, 6, "data: ") != 0) continue;
    out.emplace_back(ev.substr(7, nl - 7), nlohmann::json::parse(ev.substr(nl + 7)));
  }
  return out;
}

}  // namespace rw::server::testing
