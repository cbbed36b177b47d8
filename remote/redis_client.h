// A small blocking client for one Redis deployment: a single server or a Redis Cluster.
// It knows only what the remote cache tier needs: GET (one or many keys, pipelined), SET with an optional
// expiry, EXISTS, DEL and PING, each on one key, so every command stays inside one cluster hash slot. Each
// node is one RedisConnection (remote/redis_connection.h: hiredis formats and parses, the transport is plain
// TCP or TLS), so everything here is the same for both.
//
// Faults are values: a refused connection, a timeout, an error reply or a torn connection comes back as an
// Error and the connection is dropped and re-opened by the next call. After a failure the client stops
// touching the network for a back-off period (100 ms doubling to 30 s) and answers Unavailable at once, so a
// dead or slow server costs its callers nothing; the first failure of an incident and the recovery are logged
// once each.
//
// Redirects: a MOVED or ASK reply is followed only to a node of the cluster's own slot map (CLUSTER SLOTS, read
// from the configured node and read again once when a redirect names a node it lacks); a redirect anywhere else
// is refused (counted, logged) and the call fails, so the password in the URL is only ever sent to the
// configured node and the nodes its slot map names.
//
// TLS: a rediss:// URL connects every node (the seed and those of the slot map) over TLS with the context in
// RedisOptions::tls (remote/redis_tls.h: CA store, client certificate), verifying each server's certificate for
// the host the client dialled. A TLS failure is an error like any other (back-off, logged once per incident)
// and is counted in the context's failures().
//
// Not thread-safe: one caller at a time (the remote tier drives it from its own worker thread); the counters
// may be read from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/expected.h"
#include "remote/redis_tls.h"

namespace rw::remote {

class RedisConnection;

// redis://[:PASSWORD@]HOST[:PORT][/DB], or rediss://... for TLS. PORT defaults to 6379, DB to 0 (a Cluster has
// only DB 0).
struct RedisUrl {
  bool tls = false;  // rediss://
  std::string host;
  int port = 6379;
  int db = 0;
  std::string password;
  std::string ToString() const;  // without the password
};
Expected<RedisUrl> ParseRedisUrl(std::string_view url);

struct RedisOptions {
  int connect_timeout_ms = 500;
  int command_timeout_ms = 2000;
  int backoff_min_ms = 100;
  int backoff_max_ms = 30000;
  std::shared_ptr<TlsContext> tls;  // required for rediss:// URLs (TlsContext::Create), unused otherwise
  // A reply longer than this (a server sending more than was asked for) fails the call before it is read whole,
  // and the connection is dropped. 0: no cap.
  int64_t max_reply_bytes = 0;
};

// The cluster hash slot of a key (CRC16/XMODEM mod 16384, of the {hash tag} when the key has one).
int KeySlot(std::string_view key);

// One reply, as the tier needs it.
struct RedisReply {
  enum Type { kNil, kString, kInteger, kStatus, kError };
  Type type = kNil;
  std::string str;        // kString, kStatus, kError
  long long integer = 0;  // kInteger
};

class RedisClient {
 public:
  RedisClient(RedisUrl url, RedisOptions options);
  ~RedisClient();
  RedisClient(const RedisClient&) = delete;
  RedisClient& operator=(const RedisClient&) = delete;

  // nullopt: no such key.
  Expected<std::optional<std::string>> Get(std::string_view key);
  // One GET per key, pipelined per node. Fails as a whole on a connection error.
  Expected<std::vector<std::optional<std::string>>> MultiGet(std::span<const std::string> keys);
  // Single-key commands (command[1] is the key), pipelined per node, replies in order. A key whose slot moved
  // is retried alone on its new node. Fails as a whole on a connection error.
  Expected<std::vector<RedisReply>> Pipeline(std::span<const std::vector<std::string>> commands);
  // ttl_s > 0 sets an expiry in seconds.
  Status Put(std::string_view key, std::string_view value, int64_t ttl_s = 0);
  Expected<bool> Exists(std::string_view key);
  Status Delete(std::string_view key);
  Status Ping();

  bool cluster() const { return cluster_; }
  // MOVED / ASK replies naming a node outside the slot map (not followed).
  uint64_t redirects_refused() const { return redirects_refused_.load(std::memory_order_relaxed); }
  // True while the client is backing off after a failure (calls answer Unavailable without I/O).
  bool backing_off() const;
  // TLS handshake and protocol failures of this client's context (shared with whoever shares the context).
  uint64_t tls_failures() const { return options_.tls ? options_.tls->failures() : 0; }
  const RedisUrl& url() const { return url_; }

 private:
  struct Node;
  using Reply = RedisReply;
  using Argv = std::vector<std::string_view>;

  Status EnsureTopology();
  Status LoadSlots(RedisConnection& conn);
  // The node of the current slot map (or the configured one) named "host:port" by a redirect; null otherwise.
  Node* MapNode(std::string_view target);
  Expected<Node*> NodeFor(std::string_view key);
  Expected<RedisConnection*> Connect(Node& node);
  // Runs commands (all keyed into the same slot owner) pipelined on one node; follows one MOVED/ASK.
  Expected<std::vector<Reply>> Run(std::string_view key, std::span<const Argv> commands);
  Expected<std::vector<Reply>> RunOn(Node& node, std::span<const Argv> commands, bool asking);
  Status Fail(Error error);
  void Succeeded();
  Status Gate() const;

  RedisUrl url_;
  RedisOptions options_;
  bool topology_known_ = false;
  bool cluster_ = false;
  std::map<std::string, std::unique_ptr<Node>> nodes_;  // "host:port" -> node (the seed and slot map owners)
  std::map<std::string, Node*> members_;                // "host:port" of the seed and the current slot map
  std::vector<Node*> slots_;                            // [16384] owner of each slot (cluster only)
  Node* single_ = nullptr;                              // the server (not cluster)
  std::chrono::steady_clock::time_point retry_at_{};
  int backoff_ms_ = 0;
  bool down_ = false;
  std::atomic<uint64_t> redirects_refused_{0};
};

}  // namespace rw::remote
