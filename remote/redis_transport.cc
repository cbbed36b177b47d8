#include "remote/redis_transport.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace rw::remote {
namespace {

int MillisUntil(Deadline deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  return static_cast<int>(std::clamp<int64_t>(left.count(), 0, 1 << 30));
}

class PlainTransport final : public Transport {
 public:
  explicit PlainTransport(Socket socket) : socket_(std::move(socket)) {}

  Status WriteAll(std::string_view data, Deadline deadline) override {
    while (!data.empty()) {
      const ssize_t n = send(socket_.fd(), data.data(), data.size(), MSG_NOSIGNAL);
      if (n > 0) {
        data.remove_prefix(static_cast<size_t>(n));
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        REWIND_RETURN_IF_ERROR(socket_.Wait(POLLOUT, deadline, "writing"));
      } else if (n < 0 && errno != EINTR) {
        return Error::Unavailable(std::string("write failed: ") + std::strerror(errno));
      }
    }
    return Status::Ok();
  }

  Expected<size_t> Read(std::span<char> buf, Deadline deadline) override {
    for (;;) {
      const ssize_t n = recv(socket_.fd(), buf.data(), buf.size(), 0);
      if (n > 0) return static_cast<size_t>(n);
      if (n == 0) return Error::Unavailable("the server closed the connection");
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        REWIND_RETURN_IF_ERROR(socket_.Wait(POLLIN, deadline, "reading"));
      } else if (errno != EINTR) {
        return Error::Unavailable(std::string("read failed: ") + std::strerror(errno));
      }
    }
  }

 private:
  Socket socket_;
};

}  // namespace

Socket::~Socket() {
  if (fd_ >= 0) close(fd_);
}

Socket& Socket::operator=(Socket&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

Status Socket::Wait(short events, Deadline deadline, std::string_view what) const {
  for (;;) {
    pollfd p{fd_, events, 0};
    const int r = poll(&p, 1, MillisUntil(deadline));
    if (r > 0) return Status::Ok();  // ready, or an error/hang-up the next call reports
    if (r == 0) return Error::Unavailable("timed out while " + std::string(what));
    if (errno != EINTR) return Error::Unavailable(std::string("poll failed: ") + std::strerror(errno));
  }
}

Expected<Socket> ConnectTcp(const std::string& host, int port, Deadline deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int r = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); r != 0)
    return Error::Unavailable("cannot resolve " + host + ": " + gai_strerror(r));
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> list(found, &freeaddrinfo);
  std::string why = "no address";
  for (const addrinfo* a = found; a; a = a->ai_next) {
    Socket s(socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol));
    if (s.fd() < 0) {
      why = std::string("socket: ") + std::strerror(errno);
      continue;
    }
    int err = 0;
    if (connect(s.fd(), a->ai_addr, a->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) {
        why = std::strerror(errno);
        continue;
      }
      if (Status w = s.Wait(POLLOUT, deadline, "connecting"); !w.ok()) {
        why = w.error().message;
        continue;
      }
      socklen_t len = sizeof(err);
      if (getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    }
    if (err != 0) {
      why = std::strerror(err);
      continue;
    }
    const int one = 1;
    setsockopt(s.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return s;
  }
  return Error::Unavailable(why);
}

std::unique_ptr<Transport> MakePlainTransport(Socket socket) {
  return std::make_unique<PlainTransport>(std::move(socket));
}

}  // namespace rw::remote
