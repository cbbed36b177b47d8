// Test helper: a real redis-server on a free loopback port in a temporary folder, started and stopped by the
// test, optionally with a TLS port too (the plain port stays open for the test's own redis-cli commands). Tests
// that need it skip (and say why) where redis-server is not installed.
#pragma once

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "remote/redis_client.h"

namespace rw::remote::testing {

inline bool RedisServerInstalled() { return std::system("command -v redis-server >/dev/null 2>&1") == 0; }

// Skips the calling test, saying why, where redis-server is not installed.
#define REWIND_REQUIRE_REDIS()                                                   \
  do {                                                                           \
    if (!::rw::remote::testing::RedisServerInstalled()) {                        \
      GTEST_SKIP() << "redis-server is not installed (scripts/install-deps.sh)"; \
    }                                                                            \
  } while (0)

// Short timeouts and back-off, so fault tests run in milliseconds.
inline RedisOptions FastOptions() {
  RedisOptions o;
  o.connect_timeout_ms = 200;
  o.command_timeout_ms = 500;
  o.backoff_min_ms = 50;
  o.backoff_max_ms = 100;
  return o;
}

inline int FreeLoopbackPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof(a);
  int port = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  close(fd);
  return port;
}

// A TLS port's certificates (PEM files; remote/tls_test_certs.h makes them).
struct RedisTls {
  std::string ca, cert, key;
  bool auth_clients = false;  // tls-auth-clients: require a client certificate signed by `ca`
  bool cluster = false;       // tls-cluster and tls-replication (a cluster's bus, slot map and redirects in TLS)
};

class RedisTestServer {
 public:
  // extra: more redis-server arguments, e.g. {"--maxmemory", "1mb"} or {"--cluster-enabled", "yes"}.
  explicit RedisTestServer(std::vector<std::string> extra = {}, std::optional<RedisTls> tls = std::nullopt)
      : extra_(std::move(extra)) {
    char tmpl[] = "/tmp/rewind-redis-XXXXXX";
    dir_ = mkdtemp(tmpl) ? tmpl : "";
    port_ = FreeLoopbackPort();
    if (tls) {
      tls_port_ = FreeLoopbackPort();
      extra_.insert(extra_.end(), {"--tls-port", std::to_string(tls_port_), "--tls-cert-file", tls->cert,
                                   "--tls-key-file", tls->key, "--tls-ca-cert-file", tls->ca, "--tls-auth-clients",
                                   tls->auth_clients ? "yes" : "no"});
      if (tls->cluster) extra_.insert(extra_.end(), {"--tls-cluster", "yes", "--tls-replication", "yes"});
    }
    Start();
  }
  ~RedisTestServer() {
    Stop();
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }
  RedisTestServer(const RedisTestServer&) = delete;
  RedisTestServer& operator=(const RedisTestServer&) = delete;

  int port() const { return port_; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }
  int tls_port() const { return tls_port_; }
  std::string tls_url(const std::string& host = "127.0.0.1") const {
    return "rediss://" + host + ":" + std::to_string(tls_port_);
  }
  bool running() const { return pid_ > 0; }

  bool Start() {
    if (pid_ > 0) return true;
    pid_ = fork();
    if (pid_ == 0) {
      std::vector<std::string> args = {"redis-server",
                                       "--port",
                                       std::to_string(port_),
                                       "--bind",
                                       "127.0.0.1",
                                       "--dir",
                                       dir_,
                                       "--save",
                                       "",
                                       "--appendonly",
                                       "no",
                                       "--logfile",
                                       dir_ + "/redis.log"};
      args.insert(args.end(), extra_.begin(), extra_.end());
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execvp("redis-server", argv.data());
      _exit(127);
    }
    std::string ping = "redis-cli -p " + std::to_string(port_) + " ping >/dev/null 2>&1";
    for (int i = 0; i < 200; ++i) {
      if (std::system(ping.c_str()) == 0) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    return false;
  }
  void Stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  // A stopped process: connections are accepted by the kernel but nothing is answered (a hung server).
  void Pause() {
    if (pid_ > 0) kill(pid_, SIGSTOP);
  }
  void Resume() {
    if (pid_ > 0) kill(pid_, SIGCONT);
  }
  // redis-cli against this server; returns its exit status.
  int Cli(const std::string& args) const {
    return std::system(("redis-cli -p " + std::to_string(port_) + " " + args + " >/dev/null 2>&1").c_str());
  }
  // redis-cli against this server; returns what it printed, without the trailing newline.
  std::string CliOutput(const std::string& args) const {
    std::string out;
    if (FILE* p = popen(("redis-cli -p " + std::to_string(port_) + " " + args + " 2>/dev/null").c_str(), "r")) {
      char buf[4096];
      for (size_t n; (n = fread(buf, 1, sizeof(buf), p)) > 0;) out.append(buf, n);
      pclose(p);
    }
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
  }

 private:
  std::vector<std::string> extra_;
  std::string dir_;
  int port_ = -1;
  int tls_port_ = -1;
  pid_t pid_ = -1;
};

// Three masters, no replicas, on free loopback ports: keys spread over the nodes by slot. `ok` says whether
// the cluster formed (redis-cli --cluster create) and every node sees it as up.
// With `tls` (cluster set), the nodes talk TLS to each other and to clients of their TLS ports; the cluster is
// formed and checked over the plain ports.
class RedisCluster {
 public:
  explicit RedisCluster(std::optional<RedisTls> tls = std::nullopt) {
    for (int i = 0; i < 3; ++i) {
      nodes.push_back(std::make_unique<RedisTestServer>(
          std::vector<std::string>{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                                   "--cluster-node-timeout", "2000",
                                   // The default bus port (port + 10000) overflows for ports above 55535.
                                   "--cluster-port", std::to_string(FreeLoopbackPort())},
          tls));
    }
    std::string create = "timeout 30 redis-cli --cluster create";
    for (auto& n : nodes) create += " 127.0.0.1:" + std::to_string(n->port());
    create += " --cluster-replicas 0 --cluster-yes >/dev/null 2>&1";
    ok = std::system(create.c_str()) == 0;
    // Every node must see the cluster as up (the state spreads over the cluster bus node by node).
    for (int i = 0; ok && i < 400; ++i) {
      bool all = true;
      for (auto& n : nodes) {
        std::string check =
            "redis-cli -p " + std::to_string(n->port()) + " cluster info | grep -q cluster_state:ok";
        all = all && std::system(check.c_str()) == 0;
      }
      if (all) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ok = false;
  }
  std::vector<std::unique_ptr<RedisTestServer>> nodes;
  bool ok = false;
};


}  // namespace rw::remote::testing
