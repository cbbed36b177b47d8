#include "memory/content_store.h"

#include <algorithm>
#include <limits>
#include <unordered_set>

#include "base/check.h"
#include "base/hash.h"
#include "base/log.h"
#include "memory/eviction.h"

namespace rw::memory {

Expected<std::unique_ptr<ContentStore>> ContentStore::Open(std::unique_ptr<StoreBackend> backend,
                                                           const ContentStoreConfig& config) {
  if (!backend) return Error::InvalidArgument("content store without a backend");
  if (config.page_tokens < 1 || config.half_life < 1 || config.max_bytes < 0 || config.queue_bytes < 0)
    return Error::InvalidArgument("content store: invalid configuration");
  std::unique_ptr<ContentStore> s(new ContentStore(std::move(backend), config));
  s->Load();
  s->writer_ = std::thread([raw = s.get()] { raw->WriterLoop(); });
  return s;
}

ContentStore::~ContentStore() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (writer_.joinable()) writer_.join();
}

std::vector<int32_t> ContentStore::PageEnds(int32_t end) const {
  std::vector<int32_t> ends;
  for (int32_t k = cfg_.page_tokens; k < end; k += cfg_.page_tokens) ends.push_back(k);
  if (end > 0) ends.push_back(end);
  return ends;
}

std::vector<uint64_t> ContentStore::Chains(std::span<const int32_t> tokens, std::span<const int32_t> ends) const {
  std::vector<uint64_t> out;
  out.reserve(ends.size());
  uint64_t h = cfg_.identity;
  int32_t at = 0;
  for (int32_t e : ends) {
    REWIND_CHECK(e >= at && e <= static_cast<int32_t>(tokens.size()));
    h = HashTokens(tokens.subspan(static_cast<size_t>(at), static_cast<size_t>(e - at)), h);
    at = e;
    out.push_back(h);
  }
  return out;
}

double ContentStore::Score(int64_t saved, uint64_t bytes, uint64_t last_use) const {
  const int64_t freed = static_cast<int64_t>(bytes) + saved * cfg_.kv_bytes_per_token;
  return EvictionScore(saved, freed, last_use, clock_, cfg_.half_life);
}

bool ContentStore::WalkPages(Key k, int delta) {
  for (int pass = 0; pass < 2; ++pass) {
    Key at = k;
    for (;;) {
      auto it = pages_.find(at);
      if (it == pages_.end()) return false;  // only in the first pass: the second walks the same keys
      if (pass == 1) it->second.refs += delta;
      const int32_t first = FirstOf(at.end);
      if (first == 0) break;
      at = {first, it->second.parent};
    }
    if (delta == 0) return true;
  }
  return true;
}

void ContentStore::DropState(Key key, std::vector<Deletion>* deletions) {
  auto it = states_.find(key);
  if (it == states_.end()) return;
  stats_.stored_bytes -= static_cast<int64_t>(it->second.bytes);
  deletions->push_back({StateKey(key.end, key.chain), it->second.bytes});
  states_.erase(it);
  if (!WalkPages(key, -1)) return;
  for (Key at = key;;) {  // pages no stored state needs any more
    auto p = pages_.find(at);
    if (p == pages_.end()) break;
    const int32_t first = FirstOf(at.end);
    const Key parent{first, p->second.parent};
    if (p->second.refs <= 0) {
      stats_.stored_bytes -= static_cast<int64_t>(p->second.bytes);
      deletions->push_back({PageKey(at.end, at.chain), p->second.bytes});
      pages_.erase(p);
    }
    if (first == 0) break;
    at = parent;
  }
}

void ContentStore::Load() {
  auto bytes = backend_->Get(kIndexKey);
  if (!bytes.ok()) {
    if (bytes.error().kind != ErrorKind::kNotFound)
      LOG_WARN("cache store (%s): index unreadable, starting empty: %s", backend_->Describe().c_str(),
               bytes.error().ToString().c_str());
    return;
  }
  auto idx = DecodeStoreIndex(*bytes, cfg_.identity);
  if (!idx.ok()) {
    LOG_WARN("cache store (%s): index rejected, starting empty (its values are deleted): %s",
             backend_->Describe().c_str(), idx.error().ToString().c_str());
    return;
  }
  clock_ = idx->clock;
  for (const StoreEntry& e : idx->entries) {
    const Key k{e.end, e.chain};
    if (e.kind == BlobKind::kPage) {
      pages_[k] = {e.parent, e.bytes, 0};
    } else {
      states_[k] = {e.bytes, e.last_use, e.saved_tokens};
    }
  }
  for (auto it = states_.begin(); it != states_.end();) {
    if (WalkPages(it->first, +1)) {
      stats_.stored_bytes += static_cast<int64_t>(it->second.bytes);
      ++it;
    } else {
      it = states_.erase(it);  // a page it needs is not named: unusable (its value is swept)
    }
  }
  for (auto it = pages_.begin(); it != pages_.end();) {
    if (it->second.refs > 0) {
      stats_.stored_bytes += static_cast<int64_t>(it->second.bytes);
      ++it;
    } else {
      it = pages_.erase(it);
    }
  }
  // Reopened with a smaller bound: evict down to it before anything else is written.
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t before = states_.size();
  MakeRoom(0, 0, std::numeric_limits<double>::infinity());
  if (states_.size() != before) {
    dirty_ = true;
    LOG_INFO("cache store (%s): %llu states evicted to fit the bound of %lld bytes", backend_->Describe().c_str(),
             static_cast<unsigned long long>(before - states_.size()), static_cast<long long>(cfg_.max_bytes));
  }
}

int64_t ContentStore::HeldBytes(size_t extra_entries) const {
  int64_t undeleted = 0;
  for (const Deletion& d : undeleted_) undeleted += static_cast<int64_t>(d.bytes);
  const int64_t index = 40 + 48 * static_cast<int64_t>(pages_.size() + states_.size() + extra_entries);
  return stats_.stored_bytes + undeleted + index;
}

bool ContentStore::MakeRoom(uint64_t incoming, size_t entries, double floor) {
  while (cfg_.max_bytes > 0 && HeldBytes(entries) + static_cast<int64_t>(incoming) > cfg_.max_bytes) {
    auto victim = states_.end();
    double lowest = 0;
    for (auto it = states_.begin(); it != states_.end(); ++it) {
      const double sc = Score(it->second.saved_tokens, it->second.bytes, it->second.last_use);
      if (victim == states_.end() || sc < lowest) victim = it, lowest = sc;
    }
    if (victim == states_.end() || lowest >= floor) return false;
    DropState(victim->first, &deletions_);
    ++stats_.evicted;
    dirty_ = true;
  }
  return true;
}

void ContentStore::DeleteValues(std::vector<Deletion> gone) {
  std::vector<Deletion> failed;
  std::string first_error;
  for (Deletion& d : gone) {
    if (Status st = backend_->Delete(d.key); !st.ok()) {
      if (first_error.empty()) first_error = st.error().ToString();
      failed.push_back(std::move(d));
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  stats_.delete_errors += failed.size();
  if (!failed.empty() && !delete_failing_)
    LOG_WARN("cache store (%s): %zu values not deleted (kept counted against the bound, retried after the next "
             "write): %s", backend_->Describe().c_str(), failed.size(), first_error.c_str());
  if (failed.empty() && delete_failing_ && !gone.empty())
    LOG_INFO("cache store (%s): deletes succeed again", backend_->Describe().c_str());
  if (!gone.empty()) delete_failing_ = !failed.empty();
  for (Deletion& d : failed) undeleted_.push_back(std::move(d));
  stats_.undeleted_bytes = 0;
  for (const Deletion& d : undeleted_) stats_.undeleted_bytes += static_cast<int64_t>(d.bytes);
}

void ContentStore::Sweep() {
  auto keys = backend_->Keys();
  if (!keys.ok()) {
    LOG_WARN("cache store: cannot list %s: %s", backend_->Describe().c_str(), keys.error().ToString().c_str());
    return;
  }
  std::vector<std::string> stale;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::unordered_set<std::string> evicted;
    for (const Deletion& d : deletions_) evicted.insert(d.key);
    for (const std::string& key : *keys) {
      if (key == kIndexKey) continue;
      int32_t end = 0;
      unsigned long long chain = 0;
      char kind = 0;
      bool named = false;
      if (std::sscanf(key.c_str(), "%c-%d-%16llx", &kind, &end, &chain) == 3) {
        const Key k{end, chain};
        named = kind == 'p' ? pages_.count(k) > 0 || queued_pages_.count(k) > 0
                            : kind == 's' && (states_.count(k) > 0 || queued_states_.count(k) > 0);
      }
      // Evicted at load (a smaller bound): deleted after an index without them is written, not before.
      named = named || evicted.count(key) > 0;
      if (!named) stale.push_back(key);
    }
  }
  std::vector<Deletion> gone;
  for (std::string& key : stale) gone.push_back({std::move(key), 0});  // sizes unknown: not in the bound
  const size_t n = gone.size();
  DeleteValues(std::move(gone));
  if (n > 0) LOG_INFO("cache store: deleting %zu values no index named (an interrupted write)", n);
}

bool ContentStore::HasState(std::span<const int32_t> prefix) const {
  if (prefix.empty()) return false;
  const int32_t end = static_cast<int32_t>(prefix.size());
  const Key k{end, HashTokens(prefix, cfg_.identity)};
  std::lock_guard<std::mutex> lock(mu_);
  return states_.count(k) > 0 || queued_states_.count(k) > 0;
}

std::vector<int32_t> ContentStore::MissingPages(std::span<const int32_t> prefix) const {
  const std::vector<int32_t> ends = PageEnds(static_cast<int32_t>(prefix.size()));
  const std::vector<uint64_t> chains = Chains(prefix, ends);
  std::vector<int32_t> missing;
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < ends.size(); ++i) {
    const Key k{ends[i], chains[i]};
    if (pages_.count(k) == 0 && queued_pages_.count(k) == 0) missing.push_back(ends[i]);
  }
  return missing;
}

bool ContentStore::Enqueue(StorePut put, bool urgent) {
  const int32_t end = static_cast<int32_t>(put.tokens.size());
  REWIND_CHECK(end > 0);
  int64_t bytes = static_cast<int64_t>(put.state.size() + put.tokens.size() * 4);
  std::vector<int32_t> ends;
  for (const auto& [e, rows] : put.pages) {
    bytes += static_cast<int64_t>(rows.size());
    ends.push_back(e);
  }
  ends.push_back(end);
  const std::vector<uint64_t> chains = Chains(put.tokens, ends);
  std::lock_guard<std::mutex> lock(mu_);
  if (!queue_.empty() && stats_.queued_bytes + bytes > cfg_.queue_bytes) {
    ++stats_.dropped_queue_full;
    return false;
  }
  for (size_t i = 0; i + 1 < ends.size(); ++i) ++queued_pages_[{ends[i], chains[i]}];
  ++queued_states_[{end, chains.back()}];
  stats_.queued_bytes += bytes;
  ++stats_.queued;
  Job job{std::move(put), bytes, urgent, std::chrono::steady_clock::now()};
  if (urgent) {
    queue_.insert(queue_.begin() + static_cast<std::ptrdiff_t>(urgent_queued_++), std::move(job));
  } else {
    queue_.push_back(std::move(job));
  }
  cv_.notify_all();
  return true;
}

std::vector<int32_t> ContentStore::StatesOnPath(std::span<const int32_t> prompt, int32_t after, int32_t up_to) const {
  std::vector<int32_t> out;
  up_to = std::min<int32_t>(up_to, static_cast<int32_t>(prompt.size()));
  std::lock_guard<std::mutex> lock(mu_);
  if (states_.empty()) return out;
  uint64_t h = cfg_.identity;
  for (int32_t n = 1; n <= up_to; ++n) {
    h = HashMix(h, static_cast<uint32_t>(prompt[static_cast<size_t>(n - 1)]));
    if (n > after && states_.count({n, h}) > 0) out.push_back(n);
  }
  std::reverse(out.begin(), out.end());
  return out;
}

Expected<std::string> ContentStore::ReadState(std::span<const int32_t> prefix) {
  const int32_t end = static_cast<int32_t>(prefix.size());
  const uint64_t chain = HashTokens(prefix, cfg_.identity);
  auto fail = [&](Error e) {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.read_errors;
    return e;
  };
  const int32_t first = end > 0 ? FirstOf(end) : 0;
  const uint64_t parent = HashTokens(prefix.subspan(0, static_cast<size_t>(first)), cfg_.identity);
  auto bytes = backend_->Get(StateKey(end, chain));
  if (!bytes.ok()) return fail(bytes.error());
  auto blob = DecodeBlob(*bytes, cfg_.identity, BlobKind::kState, end, chain);
  if (!blob.ok()) return fail(blob.error());
  if (blob->first != first || blob->parent != parent ||
      !std::equal(blob->tokens.begin(), blob->tokens.end(), prefix.begin() + first))
    return fail(Error::Corrupt("stored state's tokens differ from the prompt (hash collision)"));
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = states_.find({end, chain}); it != states_.end()) {
    it->second.last_use = ++clock_;
    dirty_ = true;
  }
  return std::move(blob->payload);
}

Expected<std::vector<std::string>> ContentStore::ReadPages(std::span<const int32_t> prefix, int32_t from_page) {
  const std::vector<int32_t> ends = PageEnds(static_cast<int32_t>(prefix.size()));
  const std::vector<uint64_t> chains = Chains(prefix, ends);
  std::vector<std::string> out;
  for (size_t i = static_cast<size_t>(std::max(0, from_page)); i < ends.size(); ++i) {
    const int32_t first = FirstOf(ends[i]);
    auto bytes = backend_->Get(PageKey(ends[i], chains[i]));
    Expected<Blob> blob = bytes.ok() ? DecodeBlob(*bytes, cfg_.identity, BlobKind::kPage, ends[i], chains[i])
                                     : Expected<Blob>(bytes.error());
    if (blob.ok() && (blob->first != first || blob->parent != (i == 0 ? cfg_.identity : chains[i - 1]) ||
                      !std::equal(blob->tokens.begin(), blob->tokens.end(), prefix.begin() + first)))
      blob = Error::Corrupt("stored page's tokens differ from the prompt (hash collision)");
    if (!blob.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.read_errors;
      return blob.error();
    }
    out.push_back(std::move(blob->payload));
  }
  return out;
}

void ContentStore::Forget(std::span<const int32_t> prefix) {
  const Key k{static_cast<int32_t>(prefix.size()), HashTokens(prefix, cfg_.identity)};
  std::lock_guard<std::mutex> lock(mu_);
  DropState(k, &deletions_);
  dirty_ = true;
  cv_.notify_all();
  visible_cv_.notify_all();
}

void ContentStore::Flush() {
  std::unique_lock<std::mutex> lock(mu_);
  dirty_ = true;
  cv_.notify_all();
  idle_cv_.wait(lock, [&] { return queue_.empty() && !busy_ && !dirty_ && deletions_.empty() && !sync_owed_; });
}

std::vector<ContentStore::StateInfo> ContentStore::States() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<StateInfo> out;
  out.reserve(states_.size());
  for (const auto& [k, s] : states_) out.push_back({k.end, k.chain, s.bytes});
  return out;
}

uint64_t ContentStore::Chain(std::span<const int32_t> prefix) const { return HashTokens(prefix, cfg_.identity); }

ContentStoreStats ContentStore::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  ContentStoreStats s = stats_;
  s.states = static_cast<int64_t>(states_.size());
  s.pages = static_cast<int64_t>(pages_.size());
  s.queued = static_cast<int64_t>(queue_.size());
  return s;
}

}  // namespace rw::memory
