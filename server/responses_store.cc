#include "server/responses_store.h"

#include <algorithm>

namespace rw::server {

void ResponseStore::Configure(int max_entries, int64_t max_bytes, std::chrono::seconds ttl) {
  std::lock_guard<std::mutex> lock(mu_);
  max_entries_ = max_entries;
  max_bytes_ = max_bytes;
  ttl_ = ttl;
  Expire(Clock::now());
}

void ResponseStore::Expire(Clock::time_point now) {
  while (!order_.empty() && (static_cast<int>(order_.size()) > std::max(max_entries_, 0) ||
                             bytes_ > std::max<int64_t>(max_bytes_, 0) || now - order_.front().first > ttl_)) {
    auto it = entries_.find(order_.front().second);
    if (it != entries_.end()) {
      bytes_ -= it->second.bytes;
      entries_.erase(it);
    }
    order_.pop_front();
  }
}

bool ResponseStore::Put(const std::string& id, const std::string& owner, nlohmann::ordered_json messages,
                        Clock::time_point now) {
  const int64_t size = static_cast<int64_t>(messages.dump(-1, ' ', false,
                                                          nlohmann::ordered_json::error_handler_t::replace)
                                                .size() +
                                            id.size() + owner.size());
  std::lock_guard<std::mutex> lock(mu_);
  if (max_entries_ <= 0 || size > max_bytes_) return false;
  if (auto it = entries_.find(id); it != entries_.end()) bytes_ -= it->second.bytes;  // ids are unique anyway
  entries_[id] = Entry{owner, std::move(messages), size};
  bytes_ += size;
  order_.emplace_back(now, id);
  Expire(now);
  return true;
}

std::optional<nlohmann::ordered_json> ResponseStore::Get(const std::string& id, const std::string& owner,
                                                         Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  Expire(now);
  auto it = entries_.find(id);
  if (it == entries_.end() || it->second.owner != owner) return std::nullopt;
  return it->second.messages;
}

size_t ResponseStore::size() {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

int64_t ResponseStore::bytes() {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

}  // namespace rw::server
