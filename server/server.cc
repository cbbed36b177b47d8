#include "server/server.h"

#include <algorithm>
#include <exception>
#include <thread>

#include "base/log.h"
#include "base/sha256.h"
#include "server/anthropic_convert.h"
#include "server/server_impl.h"

namespace rw::server {

using nlohmann::json;

namespace {

struct Route {
  const char* pattern;  // httplib regex
  const char* label;    // metric label
  bool post;            // POST (else GET)
  void (Server::Impl::*handler)(const httplib::Request&, httplib::Response&);
  bool is_public;  // served without the API key (as llama-server does)
};

const std::vector<Route>& Routes() {
  using I = Server::Impl;
  static const std::vector<Route> routes = {
      {"/health", "/health", false, &I::HandleHealth, true},
      {"/v1/health", "/health", false, &I::HandleHealth, true},
      {"/v1/models", "/v1/models", false, &I::HandleModels, true},
      {"/models", "/v1/models", false, &I::HandleModels, true},
      {"/metrics", "/metrics", false, &I::HandleMetrics, false},
      {"/slots", "/slots", false, &I::HandleSlots, false},
      {"/cache", "/cache", false, &I::HandleCache, false},
      {"/cache/tree", "/cache/tree", false, &I::HandleCacheTree, false},
      {"/v1/chat/completions", "/v1/chat/completions", true, &I::HandleChat, false},
      {"/chat/completions", "/v1/chat/completions", true, &I::HandleChat, false},
      {"/v1/completions", "/v1/completions", true, &I::HandleCompletion, false},
      {"/completions", "/v1/completions", true, &I::HandleCompletion, false},
      {"/tokenize", "/tokenize", true, &I::HandleTokenize, false},
      {"/detokenize", "/detokenize", true, &I::HandleDetokenize, false},
      {"/apply-template", "/apply-template", true, &I::HandleApplyTemplate, false},
      {"/v1/messages", "/v1/messages", true, &I::HandleAnthropicMessages, false},
      {"/v1/messages/count_tokens", "/v1/messages/count_tokens", true, &I::HandleAnthropicCountTokens, false},
      {"/v1/responses", "/v1/responses", true, &I::HandleResponses, false},
      {"/responses", "/v1/responses", true, &I::HandleResponses, false},
      {"/completion", "/completion", true, &I::HandleCompletion, false},
      {"/props", "/props", false, &I::HandleProps, false},
      {"/props", "/props", true, &I::HandlePropsUpdate, false},
      {"/slots/([^/]*)", "/slots/{id}", true, &I::HandleSlotAction, false},  // last (FindRoute)
  };
  return routes;
}

// The route a request belongs to, for metrics and auth; nullptr for unknown paths. A path served for both
// methods has one route per method.
const Route* FindRoute(const std::string& path, const std::string& method = "") {
  const Route* any = nullptr;
  for (const auto& r : Routes()) {
    if (path != r.pattern) continue;
    if (method.empty() || (method == "POST") == r.post) return &r;
    if (!any) any = &r;
  }
  if (any) return any;
  if (path.rfind("/slots/", 0) == 0) return &Routes().back();  // the /slots/{id} pattern
  return nullptr;
}

}  // namespace

bool ConstantTimeEquals(const std::string& a, const std::string& b) {
  // Compares every byte of the longer string so the time depends only on the lengths.
  size_t n = std::max(a.size(), b.size());
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

std::vector<int32_t> OffsetsToTokenPositions(const TextCodec& codec, const std::vector<int32_t>& tokens,
                                             const std::vector<size_t>& offsets) {
  std::vector<size_t> sorted = offsets;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int32_t> out;
  size_t pos = 0, k = 0;
  for (size_t i = 0; i < tokens.size() && k < sorted.size(); ++i) {
    while (k < sorted.size() && sorted[k] < pos) ++k;  // inside the previous token
    if (k < sorted.size() && sorted[k] == pos) {
      out.push_back(static_cast<int32_t>(i));
      while (k < sorted.size() && sorted[k] == pos) ++k;
    }
    pos += codec.TokenToPiece(tokens[i], true).size();
  }
  return out;
}

void Server::Impl::SendJson(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(DumpJson(body), "application/json; charset=utf-8");
}

void Server::Impl::SendError(httplib::Response& res, const ApiError& error) {
  SendJson(res, error.status, error.ToJson());
}

Server::Impl::Impl(ServerConfig c)
    : config(std::move(c)), parse_options(config.sampling_defaults, config.limits) {
  size_t start = 0;
  while (start <= config.api_key.size() && !config.api_key.empty()) {
    size_t comma = config.api_key.find(',', start);
    std::string k = config.api_key.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!k.empty()) keys.push_back(std::move(k));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  for (const auto& k : config.api_keys)
    if (!k.empty()) keys.push_back(k);
  stored_responses.Configure(config.responses_max, config.responses_max_bytes,
                             std::chrono::seconds(config.responses_ttl_s));
}

namespace {

// The key a request presents: 'Authorization: Bearer KEY' or 'X-Api-Key: KEY' ("" = none).
std::string PresentedKey(const httplib::Request& req) {
  std::string auth = req.get_header_value("Authorization");
  const std::string bearer = "Bearer ";
  if (auth.size() > bearer.size() && auth.compare(0, bearer.size(), bearer) == 0) return auth.substr(bearer.size());
  return req.get_header_value("X-Api-Key");
}

}  // namespace

bool Server::Impl::Authorized(const httplib::Request& req) const {
  if (keys.empty()) return true;
  const std::string key = PresentedKey(req);
  bool ok = false;
  for (const auto& k : keys) ok |= ConstantTimeEquals(key, k);  // every key compared: no early exit
  return ok && !key.empty();
}

std::string Server::Impl::ClientOf(const httplib::Request& req) const {
  if (keys.empty()) return "";
  return DigestHex(Sha256("rewind-client\n" + PresentedKey(req)));
}

void Server::Impl::Routes() {
  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (config.cors) {
      // Browser clients: any origin may call (as llama-server allows); the API key still applies.
      std::string origin = req.get_header_value("Origin");
      res.set_header("Access-Control-Allow-Origin", origin.empty() ? "*" : origin);
      if (!origin.empty()) res.set_header("Vary", "Origin");
      if (req.method == "OPTIONS") {  // preflight
        res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
        std::string asked = req.get_header_value("Access-Control-Request-Headers");
        res.set_header("Access-Control-Allow-Headers", asked.empty() ? "*" : asked);
        res.set_header("Access-Control-Max-Age", "86400");
        res.status = 204;
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    const Route* route = FindRoute(req.path, req.method);
    // Anthropic clients get errors in Anthropic's shape.
    bool anthropic = route && std::string(route->label).rfind("/v1/messages", 0) == 0;
    auto send = [&](const ApiError& e) {
      SendJson(res, e.status, anthropic ? json(AnthropicErrorJson(e)) : e.ToJson());
    };
    if (route && !route->is_public && !Authorized(req)) {
      send(ApiError::Unauthorized());
      return httplib::Server::HandlerResponse::Handled;
    }
    if (route && route->handler == &Impl::HandleSlots && !config.slots_endpoint) {
      send(ApiError{501, "This server does not support the slots endpoint (started with --no-slots)",
                    "not_supported_error", "", ""});
      return httplib::Server::HandlerResponse::Handled;
    }
    State s = state.load();
    if (s != State::kReady && route && route->handler != &Impl::HandleHealth) {
      send(ApiError::Unavailable(s == State::kLoading ? "Loading model" : "Model failed to load: " + load_error));
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  if (config.webui) WebUiRoutes();
  for (const auto& r : rw::server::Routes()) {
    auto handler = [this, h = r.handler](const httplib::Request& req, httplib::Response& res) {
      try {
        (this->*h)(req, res);
      } catch (const std::exception& e) {
        LOG_ERROR("%s %s: internal error: %s", req.method.c_str(), req.path.c_str(), e.what());
        SendError(res, ApiError::Internal(std::string("internal error: ") + e.what()));
      } catch (...) {
        SendError(res, ApiError::Internal("internal error"));
      }
    };
    std::string method = r.post ? "POST" : "GET";
    bool other_method_served = false;  // the same path has a route for the other method
    for (const auto& o : rw::server::Routes()) {
      other_method_served = other_method_served || (&o != &r && std::string(o.pattern) == r.pattern && o.post != r.post);
    }
    if (other_method_served) method = "GET, POST";
    auto not_allowed = [method](const httplib::Request& req, httplib::Response& res) {
      res.set_header("Allow", method);
      SendError(res, ApiError::MethodNotAllowed("method " + req.method + " is not allowed on " + req.path +
                                                " (use " + method + ")"));
    };
    if (r.post) {
      http.Post(r.pattern, handler);
      if (!other_method_served) http.Get(r.pattern, not_allowed);
    } else {
      http.Get(r.pattern, handler);
      if (!other_method_served) http.Post(r.pattern, not_allowed);
    }
    if (other_method_served && r.post) continue;  // PUT/PATCH/DELETE registered with the GET route
    http.Put(r.pattern, not_allowed);
    http.Patch(r.pattern, not_allowed);
    http.Delete(r.pattern, not_allowed);
  }
  http.set_error_handler(
      httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        ApiError e = res.status == 404 ? ApiError::NotFound("unknown endpoint " + req.method + " " + req.path)
                                       : ApiError{res.status, "HTTP error " + std::to_string(res.status),
                                                  "invalid_request_error", "", ""};
        SendError(res, e);
        return httplib::Server::HandlerResponse::Handled;
      }));
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
    SendError(res, ApiError::Internal("internal error"));
  });
  http.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    const Route* route = FindRoute(req.path, req.method);
    metrics.CountRequest(route ? route->label : "other", res.status);
    bool generation = route && (route->handler == &Impl::HandleChat || route->handler == &Impl::HandleCompletion ||
                                route->handler == &Impl::HandleAnthropicMessages ||
                                route->handler == &Impl::HandleResponses);
    // Pollers (the web page, monitors) would flood the log: their successful GETs are not logged.
    bool polled = req.method == "GET" && res.status == 200 &&
                  (!route || route->handler == &Impl::HandleHealth || route->handler == &Impl::HandleCache ||
                   route->handler == &Impl::HandleCacheTree || route->handler == &Impl::HandleMetrics);
    if (config.log_requests && !(generation && res.status == 200) && !polled) {
      LOG_INFO("%s %s %d %s", req.method.c_str(), req.path.c_str(), res.status, req.remote_addr.c_str());
    }
  });
}

Server::Server(ServerConfig config) : impl_(std::make_unique<Impl>(std::move(config))) {
  int threads = impl_->config.http_threads > 0 ? impl_->config.http_threads : 64;
  impl_->http.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  impl_->http.set_payload_max_length(64ull << 20);
  impl_->http.set_keep_alive_max_count(1000);
  impl_->http.set_keep_alive_timeout(10);
  impl_->http.set_read_timeout(impl_->config.timeout_s);
  impl_->http.set_write_timeout(impl_->config.timeout_s);
  impl_->Routes();
}

Server::~Server() { Stop(); }

Expected<int> Server::Bind() {
  const auto& c = impl_->config;
  int port = c.port;
  if (port == 0) {
    port = impl_->http.bind_to_any_port(c.host);
    if (port < 0) return Error::Io("cannot bind to " + c.host);
  } else if (!impl_->http.bind_to_port(c.host, port)) {
    return Error::Io("cannot bind to " + c.host + ":" + std::to_string(port) + " (address in use?)");
  }
  impl_->bound_port = port;
  return port;
}

void Server::Run() { impl_->http.listen_after_bind(); }

void Server::Stop() {
  if (impl_->http.is_running()) impl_->http.stop();
}

int Server::port() const { return impl_->bound_port; }

void Server::SetBackend(const Backend& backend) {
  impl_->backend = backend;
  impl_->info = backend.engine->Info();
  impl_->state.store(Impl::State::kReady);
}

void Server::SetLoadFailed(const std::string& message) {
  impl_->load_error = message;
  impl_->state.store(Impl::State::kFailed);
}

ServerMetrics& Server::metrics() { return impl_->metrics; }

}  // namespace rw::server
