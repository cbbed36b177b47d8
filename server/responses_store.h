// Responses API memory: the conversation behind each answered response, so that a later request can continue
// it with previous_response_id. Bounded by count and age (oldest dropped first); thread-safe.
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
  // `max_entries` <= 0 stores nothing.
  void Configure(int max_entries, std::chrono::seconds ttl);
  // `messages`: the chat messages the response continued plus its own answer (chat-completions form).
  void Put(const std::string& id, nlohmann::ordered_json messages, Clock::time_point now = Clock::now());
  std::optional<nlohmann::ordered_json> Get(const std::string& id, Clock::time_point now = Clock::now());
  size_t size();

 private:
  void Expire(Clock::time_point now);  // mu_ held
  std::mutex mu_;
  int max_entries_ = 256;
  std::chrono::seconds ttl_{3600};
  std::deque<std::pair<Clock::time_point, std::string>> order_;  // insertion order
  std::unordered_map<std::string, nlohmann::ordered_json> entries_;
};

}  // namespace rw::server
