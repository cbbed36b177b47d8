// Responses API memory: the conversation behind each answered response, so that a later request can continue
// it with previous_response_id. Each entry belongs to the client (API key) that created it: another client
// asking for it gets "not found", as for an id that never existed. Bounded by count, bytes and age (oldest
// dropped first); thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_map>

namespace rw::server {

class ResponseStore {
 public:
  using Clock = std::chrono::steady_clock;
  // `max_entries` <= 0 or `max_bytes` <= 0 stores nothing.
  void Configure(int max_entries, int64_t max_bytes, std::chrono::seconds ttl);
  // `messages`: the chat messages the response continued plus its own answer (chat-completions form);
  // `owner`: the client it belongs to (Server::Impl::ClientOf). An entry larger than the byte bound is not
  // kept (false).
  bool Put(const std::string& id, const std::string& owner, nlohmann::ordered_json messages,
           Clock::time_point now = Clock::now());
  // The entry, if it exists, has not expired and belongs to `owner`.
  std::optional<nlohmann::ordered_json> Get(const std::string& id, const std::string& owner,
                                            Clock::time_point now = Clock::now());
  size_t size();
  int64_t bytes();

 private:
  struct Entry {
    std::string owner;
    nlohmann::ordered_json messages;
    int64_t bytes = 0;  // the messages' JSON text size (what they cost, roughly)
  };
  void Expire(Clock::time_point now);  // mu_ held
  std::mutex mu_;
  int max_entries_ = 256;
  int64_t max_bytes_ = int64_t{64} << 20;
  std::chrono::seconds ttl_{3600};
  int64_t bytes_ = 0;  // sum of entries_' bytes
  std::deque<std::pair<Clock::time_point, std::string>> order_;  // insertion order
  std::unordered_map<std::string, Entry> entries_;
};

}  // namespace rw::server
