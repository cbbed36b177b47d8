#include "server/responses_store.h"

#include <algorithm>

namespace rw::server {

void ResponseStore::Configure(int max_entries, std::chrono::seconds ttl) {
  std::lock_guard<std::mutex> lock(mu_);
  max_entries_ = max_entries;
  ttl_ = ttl;
}

void ResponseStore::Expire(Clock::time_point now) {
  while (!order_.empty() &&
         (static_cast<int>(order_.size()) > std::max(max_entries_, 0) || now - order_.front().first > ttl_)) {
    entries_.erase(order_.front().second);
    order_.pop_front();
  }
}

void ResponseStore::Put(const std::string& id, nlohmann::ordered_json messages, Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  if (max_entries_ <= 0) return;
  entries_[id] = std::move(messages);
  order_.emplace_back(now, id);
  Expire(now);
}

std::optional<nlohmann::ordered_json> ResponseStore::Get(const std::string& id, Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  Expire(now);
  auto it = entries_.find(id);
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

size_t ResponseStore::size() {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

}  // namespace rw::server
