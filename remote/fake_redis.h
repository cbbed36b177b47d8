// Test helper: a fake Redis on a free loopback port that answers each command through a handler, for replies a
// real server will not give on demand (a MOVED to a foreign host, a slot map naming several fake nodes). It
// records every command it received, so a test can check what was sent where (a password, say).
#pragma once

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace rw::remote::testing {

class FakeRedis {
 public:
  using Args = std::vector<std::string>;
  // Returns the raw RESP reply to one command, e.g. "+OK\r\n" or "-MOVED 1 127.0.0.1:7000\r\n".
  using Handler = std::function<std::string(const Args&)>;

  FakeRedis() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    int one = 1;
    setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 && listen(fd_, 16) == 0 &&
        getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0)
      port_ = ntohs(a.sin_port);
  }
  ~FakeRedis() {
    stop_ = true;
    if (accept_.joinable()) accept_.join();  // then nobody adds sessions
    for (auto& t : threads_) t.join();
    close(fd_);
  }
  FakeRedis(const FakeRedis&) = delete;
  FakeRedis& operator=(const FakeRedis&) = delete;

  int port() const { return port_; }
  std::string url(const std::string& password = "") const {
    return "redis://" + (password.empty() ? "" : ":" + password + "@") + "127.0.0.1:" + std::to_string(port_);
  }
  // Starts answering (call once, after the handler is known).
  void Serve(Handler handler) {
    handler_ = std::move(handler);
    accept_ = std::thread([this] { AcceptLoop(); });
  }
  int connections() const { return connections_.load(); }
  std::vector<Args> received() const {
    std::lock_guard<std::mutex> lock(mu_);
    return received_;
  }

  static std::string Bulk(const std::string& s) { return "$" + std::to_string(s.size()) + "\r\n" + s + "\r\n"; }
  static std::string Int(long long v) { return ":" + std::to_string(v) + "\r\n"; }

 private:
  void AcceptLoop() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 20) <= 0) continue;
      const int c = accept(fd_, nullptr, nullptr);
      if (c < 0) continue;
      ++connections_;
      threads_.emplace_back([this, c] { Session(c); });  // only the accept thread touches threads_ meanwhile
    }
  }
  void Session(int c) {
    std::string buf;
    char chunk[4096];
    while (!stop_) {
      Args args;
      size_t used = 0;
      while (!Parse(buf, &args, &used)) {
        pollfd p{c, POLLIN, 0};
        if (stop_) break;
        if (poll(&p, 1, 20) <= 0) continue;
        const ssize_t n = recv(c, chunk, sizeof(chunk), 0);
        if (n <= 0) {
          close(c);
          return;
        }
        buf.append(chunk, static_cast<size_t>(n));
      }
      if (stop_) break;
      buf.erase(0, used);
      {
        std::lock_guard<std::mutex> lock(mu_);
        received_.push_back(args);
      }
      const std::string reply = handler_(args);
      if (send(c, reply.data(), reply.size(), MSG_NOSIGNAL) < 0) break;
    }
    close(c);
  }
  // One RESP array of bulk strings from the front of `b`; false while incomplete.
  static bool Parse(const std::string& b, Args* out, size_t* used) {
    out->clear();
    size_t at = 0;
    auto line = [&](std::string* l) {
      const size_t e = b.find("\r\n", at);
      if (e == std::string::npos) return false;
      *l = b.substr(at, e - at);
      at = e + 2;
      return true;
    };
    std::string l;
    if (!line(&l) || l.empty() || l[0] != '*') return false;
    const long n = std::stol(l.substr(1));
    for (long i = 0; i < n; ++i) {
      if (!line(&l) || l.empty() || l[0] != '$') return false;
      const size_t len = std::stoul(l.substr(1));
      if (b.size() < at + len + 2) return false;
      out->push_back(b.substr(at, len));
      at += len + 2;
    }
    *used = at;
    return true;
  }

  int fd_ = -1;
  int port_ = -1;
  Handler handler_;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  std::thread accept_;
  std::vector<std::thread> threads_;
  mutable std::mutex mu_;
  std::vector<Args> received_;
};

}  // namespace rw::remote::testing
