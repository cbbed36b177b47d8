// TLS to Redis (rediss:// URLs) with OpenSSL: the server's certificate is verified against a CA store (a
// file, or the system's) and against the host name or IP address the client dialled (the URL's host, or a
// node's address in a cluster's slot map), the name is sent as SNI, and a client certificate is presented
// when one is given (servers with tls-auth-clients). TLS 1.2 at least.
//
// A handshake or verification failure, or a TLS alert later (a TLS 1.3 server that wanted a client
// certificate says so after the handshake), is an error whose message says what failed, and is counted in
// failures().
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "base/expected.h"
#include "remote/redis_transport.h"

struct ssl_ctx_st;

namespace rw::remote {

struct TlsOptions {
  std::string ca_file;    // PEM CA certificates to verify servers with; "" = the system's default store
  std::string cert_file;  // PEM client certificate (may hold its chain); "" = none
  std::string key_file;   // PEM private key of cert_file; required with it
};

// The client side of TLS, shared by every connection of a deployment (its nodes, its reader and writer).
class TlsContext : public std::enable_shared_from_this<TlsContext> {
 public:
  // Loads the CA store and the client certificate; a missing or malformed file is an error that names it.
  static Expected<std::shared_ptr<TlsContext>> Create(const TlsOptions& options);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  // The TLS handshake over a connected socket, within the deadline, verifying the server as `host`.
  Expected<std::unique_ptr<Transport>> Handshake(Socket socket, const std::string& host, Deadline deadline);

  // Handshakes and TLS-level errors on any of this context's connections (not plain timeouts or resets).
  uint64_t failures() const { return failures_.load(std::memory_order_relaxed); }
  void CountFailure() { failures_.fetch_add(1, std::memory_order_relaxed); }

 private:
  explicit TlsContext(ssl_ctx_st* ctx) : ctx_(ctx) {}
  ssl_ctx_st* ctx_;
  std::atomic<uint64_t> failures_{0};
};

}  // namespace rw::remote
