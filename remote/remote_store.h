// The remote cache tier (docs/replicas.md): checkpoints shared by every replica serving the same model file
// and build, in Redis (a single server or a Cluster). It is a backend of the content-addressed store's format
// (memory/store_format.h): the same values under the same keys (attention pages named by the chained hash of
// the token prefix they end, recurrent states by their exact prefix), with everything that decides the bits
// mixed into every key (the store identity: model fingerprint, KV type, page size, format, kernel bit
// generation).
//
// Unlike the disk tier it keeps no index: several replicas write to it at once, so a lookup asks Redis
// whether a state exists at each candidate position (one pipelined round trip) and fetches the deepest one
// with its pages (a second one). Values are checked like the disk tier's; one that fails its check is
// deleted, never used.
//
// Redis is untrusted: anyone who can write to it could otherwise plant KV or states that every replica serves as
// exact hits. Each value is sealed with HMAC-SHA256 under the replicas' shared key (memory::SealValue) and a value
// whose MAC fails is rejected, deleted and counted; without a key the tier runs only when told to trust Redis
// (cfg.trust). Announcement markers carry a MAC too (a planted one is ignored). Reads are bounded: each value is
// read with GETRANGE up to the size this cache expects of it (a larger one is rejected, counted and deleted), and
// one lookup reads at most cfg.max_fetch_bytes (a deeper checkpoint that needs more is skipped for a shallower
// one). The key namespace includes a public id of the key (memory::MacKeyId), so replicas with different keys
// never read or delete each other's values.
//
// Writes go through a bounded queue to a writer thread (bytes and values in flight are bounded); the engine
// never waits for them. Lookups are blocking network calls: the engine makes them on the request's own thread
// before the request is queued (engine/engine_impl.cc), never on the engine thread. Every failure is a miss:
// the request is then computed, with identical results.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "base/expected.h"
#include "memory/content_store.h"
#include "remote/redis_client.h"

namespace rw::remote {

struct RemoteStoreConfig {
  uint64_t identity = 0;  // memory::StoreIdentity(...)
  int32_t page_tokens = 32;
  int64_t ttl_s = 0;  // expiry of written values (0: none; Redis' maxmemory policy evicts)
  int64_t queue_bytes = int64_t{256} << 20;  // bound on bytes waiting for the writer (beyond: not written)
  std::string key_prefix = "rewind:";        // namespace inside a shared Redis
  // How long a lookup waits for a state another replica announced but has not written yet (0: never waits).
  int64_t wait_ms = 1000;
  int64_t announce_ttl_s = 120;  // expiry of an announcement (a replica killed before writing leaves one)
  std::string mac_key;  // authenticates every value (HMAC-SHA256); "" only with `trust`
  bool trust = false;   // no key: values are sealed with the empty key, which authenticates nothing
  int64_t max_fetch_bytes = int64_t{1} << 30;  // bytes one Fetch may read from Redis
  // The payload sizes this cache expects (a value of another size is rejected before it is read whole). 0:
  // unknown (tests); then each value of a lookup may take an equal share of max_fetch_bytes.
  int64_t state_bytes = 0;
  int64_t page_bytes_per_token = 0;
  TlsOptions tls;  // rediss:// URLs: CA store and client certificate (unless RedisOptions::tls brings a context)
};

// What a lookup brought back: the state after prompt[0, end) and the pages [first_page, ceil(end / P)).
struct RemoteFetch {
  int32_t end = 0;  // 0: nothing usable
  int32_t first_page = 0;
  std::string state;               // the recurrent state's bytes
  std::vector<std::string> pages;  // each [attention layer][K | V][rows of the page][row bytes]
  int64_t bytes = 0;               // fetched from Redis (all values read)
  double seconds = 0;              // lookup + fetch time
  bool error = false;              // Redis failed (down, slow, refused): the lookup counted as an error
  double waited_seconds = 0;       // part of `seconds` spent waiting for an announced state
};

struct RemoteStats {
  uint64_t lookups = 0, hits = 0, misses = 0, errors = 0, corrupt = 0;
  uint64_t fetched_bytes = 0;
  double fetch_seconds = 0;
  uint64_t written = 0, written_bytes = 0, dropped = 0, write_errors = 0;
  uint64_t announced = 0, waits = 0, waits_served = 0;  // announcements set; lookups that waited; and got the state
  uint64_t unauthenticated = 0;    // values and announcements whose MAC failed (rejected; values deleted)
  uint64_t oversized = 0;          // values larger than this cache expects (rejected unread, deleted)
  uint64_t capped = 0;             // checkpoints not fetched: more than max_fetch_bytes
  uint64_t redirects_refused = 0;  // cluster redirects to a node outside the slot map
  uint64_t tls_failures = 0;       // TLS handshakes that failed (verification, a refused client) and TLS errors
  int64_t queued_bytes = 0;
};

class RemoteStore {
 public:
  static Expected<std::unique_ptr<RemoteStore>> Open(const RedisUrl& url, const RemoteStoreConfig& config,
                                                     RedisOptions options = {});
  ~RemoteStore();  // writes what is queued (bounded by the client's timeouts), then stops
  RemoteStore(const RemoteStore&) = delete;
  RemoteStore& operator=(const RemoteStore&) = delete;

  // Written or queued by this replica (other replicas' values are found by Fetch).
  bool HasState(std::span<const int32_t> prefix) const;
  // Ends of the pages of `prefix` this replica has not written, queued or seen in Redis, ascending.
  std::vector<int32_t> MissingPages(std::span<const int32_t> prefix) const;
  // Queues a checkpoint (the same value the disk tier takes); false (counted) when the queue is full.
  bool Enqueue(memory::StorePut put);

  // The deepest state among `candidates` (positions in (after, prompt.size())) that Redis holds, with the
  // pages from first_page on. Blocking: call off the engine thread. Thread-safe.
  // Announcements: `announce` (0: none) is where this request promises to share its state when it ends (its
  // answer's message start); a marker says so to other replicas, in the probe's round trip. A lookup that finds
  // another replica's marker deeper than any stored state waits for that state (cfg.wait_ms at most) instead of
  // recomputing what it is about to receive: the next turn of a conversation often arrives before the previous
  // replica's asynchronous write has landed.
  RemoteFetch Fetch(std::span<const int32_t> prompt, std::span<const int32_t> candidates, int32_t after,
                    int32_t first_page, int32_t announce = 0);
  // The request that announced the state at `prefix` ended without sharing it: its marker is removed (queued).
  void Withdraw(std::span<const int32_t> prefix);

  void Flush();  // waits until the queue is written (tests, shutdown)
  RemoteStats Stats() const;
  std::string Describe() const { return url_; }

 private:
  struct Job {
    memory::StorePut put;
    int64_t bytes = 0;
    bool withdraw = false;  // only remove the announcement of put.tokens
  };
  RemoteStore(const RedisUrl& url, const RemoteStoreConfig& config, RedisOptions options);
  std::vector<int32_t> PageEnds(int32_t end) const;
  std::vector<uint64_t> Chains(std::span<const int32_t> tokens, std::span<const int32_t> ends) const;
  std::string Key(const std::string& name) const { return cfg_.key_prefix + key_id_ + ":" + name; }
  // The marker's value: a MAC of its key (a planted marker cannot make replicas wait).
  std::string AnnounceValue(const std::string& announce_key) const;
  // The most bytes the value of `key` may have (kind and span decide it); 0: unknown.
  int64_t ExpectedValueBytes(bool state, int32_t first, int32_t end) const;
  // Counts a rejected value (and logs the 1st, 2nd, 4th... of each kind), then deletes it.
  void Reject(const std::string& key, const Error& why, bool oversized);
  std::string StateKeyOf(std::span<const int32_t> prefix) const;
  std::string AnnounceKey(const std::string& state_key) const { return state_key + ":coming"; }
  // Waits (cfg_.wait_ms at most) for the deepest candidate another replica announced (`coming`) when it is
  // deeper than every `stored` one; marks it stored when it lands. `read_lock` is released while sleeping.
  void WaitForAnnounced(const std::vector<std::string>& state_keys, const std::function<bool(size_t)>& coming,
                        std::unique_lock<std::mutex>& read_lock, std::vector<char>& stored, RemoteFetch& out);
  void WriterLoop();
  void Process(Job& job);

  RemoteStoreConfig cfg_;
  std::string key_id_;  // memory::MacKeyId(cfg_.mac_key)
  std::string url_;
  RedisClient reader_;         // guarded by read_mu_
  RedisClient writer_client_;  // the writer thread's
  std::mutex read_mu_;

  mutable std::mutex mu_;
  std::condition_variable cv_, idle_cv_;
  std::deque<Job> queue_;
  std::unordered_set<std::string> known_;  // page and state keys written, queued or seen
  std::unordered_set<std::string> announced_;  // state keys this replica announced and has not written
  bool busy_ = false, stop_ = false;
  RemoteStats stats_;
  std::thread writer_;
};

}  // namespace rw::remote
