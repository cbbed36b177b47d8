// The byte stream under a Redis connection (remote/redis_connection.h): plain TCP here, TLS in
// remote/redis_tls.h. Every wait has a deadline, so a dead or stalled server costs its caller a bounded time;
// sockets are non-blocking and writes never raise SIGPIPE (a library must not kill a process whose peer
// left).
#pragma once

#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "base/expected.h"

namespace rw::remote {

using Deadline = std::chrono::steady_clock::time_point;

// A connected stream to one server. Errors are kUnavailable (refused, reset, timed out, closed) with a
// message that says which; a stream that failed once is not used again.
class Transport {
 public:
  virtual ~Transport() = default;
  // Writes all of `data`, waiting for the socket until `deadline`.
  virtual Status WriteAll(std::string_view data, Deadline deadline) = 0;
  // Reads what has arrived (at least one byte, at most buf.size()), waiting until `deadline` for it. A
  // connection the server closed is an error.
  virtual Expected<size_t> Read(std::span<char> buf, Deadline deadline) = 0;
};

// An open, non-blocking TCP socket, closed when destroyed.
class Socket {
 public:
  explicit Socket(int fd = -1) : fd_(fd) {}
  ~Socket();
  Socket(Socket&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Socket& operator=(Socket&& o) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  int fd() const { return fd_; }
  // Waits until the socket is ready for `events` (POLLIN, POLLOUT) or the deadline passes (an error: "timed
  // out while <what>").
  Status Wait(short events, Deadline deadline, std::string_view what) const;

 private:
  int fd_;
};

// Connects to host:port within the deadline, trying each address the name resolves to in turn. The socket is
// non-blocking, with TCP_NODELAY (commands are small and latency matters more than packet count).
Expected<Socket> ConnectTcp(const std::string& host, int port, Deadline deadline);

// Plain TCP over a connected socket.
std::unique_ptr<Transport> MakePlainTransport(Socket socket);

}  // namespace rw::remote
