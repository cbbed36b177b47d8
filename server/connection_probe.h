// Tells whether the client of a request that is being answered without streaming has hung up. cpp-httplib 0.11
// hands a handler no socket and only notices a closed connection when a write fails, which a non-streamed answer
// does once, at the end. The probe finds the connection's socket among the process's descriptors by its two
// endpoints (the request's local and remote address and port) and then checks it without reading or writing:
// end-of-stream (the peer closed, or reset) means gone; pending bytes (a pipelined next request) do not.
#pragma once

#include <string>

namespace rw::server {

class ConnectionProbe {
 public:
  ConnectionProbe(std::string local_addr, int local_port, std::string remote_addr, int remote_port)
      : local_addr_(std::move(local_addr)),
        remote_addr_(std::move(remote_addr)),
        local_port_(local_port),
        remote_port_(remote_port) {}

  // True once the peer has closed or reset the connection. False when it cannot tell (no matching socket).
  bool ClientGone();

 private:
  int FindSocket() const;

  std::string local_addr_, remote_addr_;
  int local_port_ = -1, remote_port_ = -1;
  int fd_ = -2;  // -2: not searched yet, -1: not found
};

}  // namespace rw::server
