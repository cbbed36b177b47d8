#include "memory/content_store.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <unordered_set>

#include "base/check.h"
#include "base/hash.h"
#include "base/log.h"
#include "memory/eviction.h"

namespace rw::memory {
namespace {

// Repeated failures (a full disk) are logged at the 1st, 2nd, 4th, 8th... occurrence.
bool IsPowerOfTwo(uint64_t n) { return n != 0 && (n & (n - 1)) == 0; }

}  // namespace

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

Visibility ContentStore::WaitVisible(int32_t end, uint64_t chain, std::chrono::steady_clock::time_point deadline) {
  const Key k{end, chain};
  std::unique_lock<std::mutex> lock(mu_);
  auto settled = [&]() -> std::optional<Visibility> {
    if (auto it = states_.find(k); it != states_.end()) {
      if (it->second.since < visible_snapshot_) return Visibility::kVisible;
      if (it->second.since < failed_snapshot_) return Visibility::kNotStored;  // the index naming it failed
      return std::nullopt;                                                    // written, index not put yet
    }
    if (queued_states_.count(k) > 0) return std::nullopt;  // queued or being written
    return Visibility::kNotStored;
  };
  std::optional<Visibility> v;
  visible_cv_.wait_until(lock, deadline, [&] { return (v = settled()).has_value(); });
  return v.value_or(Visibility::kTimedOut);
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

bool ContentStore::WriteIndex(std::chrono::steady_clock::time_point* visible_at, bool sync) {
  std::vector<StoreEntry> entries;
  uint64_t clock = 0, snapshot = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    snapshot = ++index_snapshots_;
    entries.reserve(pages_.size() + states_.size());
    for (const auto& [k, p] : pages_) entries.push_back({BlobKind::kPage, k.end, k.chain, p.parent, p.bytes, 0, 0});
    for (const auto& [k, s] : states_)
      entries.push_back({BlobKind::kState, k.end, k.chain, cfg_.identity, s.bytes, s.saved_tokens, s.last_use});
    clock = clock_;
  }
  // The index is put (atomically) right after the values it names, before anything is synced: a restart after a
  // process crash (kill -9) sees it at once, since the values are in the page cache already. Then one sync makes
  // values and index durable against power loss. A power cut in between may leave an index naming a value that
  // never reached the disk: reading it fails its checksum or finds nothing, and the state is dropped (I5: never
  // used), as with any torn value.
  const std::string index = EncodeStoreIndex(cfg_.identity, clock, entries);
  Status s = backend_->Put(kIndexKey, index);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (s.ok()) {
      if (visible_at) *visible_at = std::chrono::steady_clock::now();
      stats_.index_bytes = static_cast<int64_t>(index.size());
      visible_snapshot_ = std::max(visible_snapshot_, snapshot);
    } else {
      failed_snapshot_ = std::max(failed_snapshot_, snapshot);
    }
  }
  visible_cv_.notify_all();  // responses waiting for their end state (WaitVisible) go on now
  if (s.ok() && sync) s = backend_->Sync();
  if (!s.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    if (IsPowerOfTwo(++stats_.write_errors))
      LOG_WARN("cache store: index not written: %s", s.error().ToString().c_str());
  }
  return s.ok();
}

void ContentStore::Process(Job& job) {
  {  // deletes that failed before are retried first: their bytes count against the bound until they succeed
    std::vector<Deletion> retry;
    {
      std::lock_guard<std::mutex> lock(mu_);
      retry.swap(undeleted_);
    }
    if (!retry.empty()) DeleteValues(std::move(retry));
  }
  StorePut& put = job.put;
  const int32_t end = static_cast<int32_t>(put.tokens.size());
  const std::vector<int32_t> ends = PageEnds(end);
  const std::vector<uint64_t> chains = Chains(put.tokens, ends);
  const Key sk{end, chains.back()};
  auto index_of = [&](int32_t e) {
    const size_t i = static_cast<size_t>(std::lower_bound(ends.begin(), ends.end(), e) - ends.begin());
    REWIND_CHECK(i < ends.size() && ends[i] == e);
    return i;
  };
  // A value is its head followed by its payload, held by `put` until written: no copy of tens of MiB.
  struct Value {
    Key key;
    uint64_t parent = 0;
    std::string head;
    std::string_view payload;
    uint64_t bytes() const { return head.size() + payload.size(); }
  };
  std::vector<Value> pages;
  for (const auto& [e, rows] : put.pages) {
    const size_t i = index_of(e);
    const int32_t first = FirstOf(e);
    const uint64_t parent = i == 0 ? cfg_.identity : chains[i - 1];
    pages.push_back({{e, chains[i]}, parent,
                     EncodeBlobHead(cfg_.identity, BlobKind::kPage, first,
                                    std::span<const int32_t>(put.tokens).subspan(static_cast<size_t>(first),
                                                                                 static_cast<size_t>(e - first)),
                                    parent, rows),
                     rows});
  }
  const std::vector<Key> queued = [&] {
    std::vector<Key> k;
    for (const Value& v : pages) k.push_back(v.key);
    return k;
  }();
  // A state names its whole prefix by its key (the chain) but carries only its last page span's tokens: its bytes
  // do not grow with the prefix.
  const int32_t state_first = FirstOf(end);
  const Value state{sk, 0,
                    EncodeBlobHead(cfg_.identity, BlobKind::kState, state_first,
                                   std::span<const int32_t>(put.tokens).subspan(static_cast<size_t>(state_first)),
                                   ends.size() > 1 ? chains[ends.size() - 2] : cfg_.identity, put.state),
                    put.state};
  auto write = [&](const std::string& key, const Value& v) {
    const std::string_view parts[2] = {v.head, v.payload};
    return backend_->PutParts(key, parts);
  };
  bool keep = true;
  std::vector<Deletion> evicted;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::erase_if(pages, [&](const Value& v) { return pages_.count(v.key) > 0; });  // stored since it was queued
    uint64_t new_bytes = state.bytes();
    for (const Value& v : pages) new_bytes += v.bytes();
    keep = states_.count(sk) == 0;
    const double own = Score(put.saved_tokens, state.bytes(), clock_);
    if (keep && !MakeRoom(new_bytes, pages.size() + 1, own)) {
      keep = false;
      ++stats_.dropped_score;
    }
    // Every page the state needs must be stored or written now (an eviction may just have taken one).
    for (size_t i = 0; keep && i < ends.size(); ++i) {
      const Key k{ends[i], chains[i]};
      const bool writing = std::any_of(pages.begin(), pages.end(), [&](const Value& v) { return v.key == k; });
      keep = writing || pages_.count(k) > 0;
    }
    if (keep && !deletions_.empty()) evicted = std::move(deletions_), deletions_.clear();
  }
  // Room is made before the new values are written: an index without the evicted values, then their deletes. A
  // delete that fails keeps its bytes counted, and the checkpoint is written only if it still fits.
  if (!evicted.empty()) {
    WriteIndex();
    DeleteValues(std::move(evicted));
    std::lock_guard<std::mutex> lock(mu_);
    uint64_t new_bytes = state.bytes();
    for (const Value& v : pages) new_bytes += v.bytes();
    if (cfg_.max_bytes > 0 && HeldBytes(pages.size() + 1) + static_cast<int64_t>(new_bytes) > cfg_.max_bytes) {
      keep = false;
      ++stats_.dropped_no_room;
    }
  }
  Status st = Status::Ok();
  size_t written = 0;
  if (keep) {
    for (; written < pages.size() && st.ok(); ++written)
      st = write(PageKey(pages[written].key.end, pages[written].key.chain), pages[written]);
    if (st.ok()) st = write(StateKey(sk.end, sk.chain), state);
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (keep && !st.ok()) {
    for (size_t i = 0; i < written; ++i)
      deletions_.push_back({PageKey(pages[i].key.end, pages[i].key.chain), pages[i].bytes()});
    if (IsPowerOfTwo(++stats_.write_errors))
      LOG_WARN("cache store: checkpoint at %d not written: %s", end, st.error().ToString().c_str());
  } else if (keep) {
    for (const Value& v : pages) {
      pages_[v.key] = {v.parent, v.bytes(), 0};
      stats_.stored_bytes += static_cast<int64_t>(v.bytes());
    }
    states_[sk] = {state.bytes(), ++clock_, put.saved_tokens, index_snapshots_};
    stats_.stored_bytes += static_cast<int64_t>(state.bytes());
    REWIND_CHECK(WalkPages(sk, +1));
    ++stats_.written;
    dirty_ = true;
    if (job.urgent) awaiting_index_.push_back(job.queued_at);
  }
  for (const Key& k : queued)
    if (--queued_pages_[k] <= 0) queued_pages_.erase(k);
  if (--queued_states_[sk] <= 0) queued_states_.erase(sk);
  visible_cv_.notify_all();  // a waiter for a state not stored after all stops waiting
}

void ContentStore::WriterLoop() {
  Sweep();
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty() || dirty_ || sync_owed_; });
    if (!queue_.empty()) {
      Job job = std::move(queue_.front());
      queue_.pop_front();
      if (job.urgent) --urgent_queued_;
      stats_.queued_bytes -= job.bytes;
      busy_ = true;
      lock.unlock();
      Process(job);
      lock.lock();
      busy_ = false;
      // The index follows every checkpoint written (a crash loses at most the queue), and evicted values are
      // deleted once an index without them is written.
    }
    if (dirty_ || !deletions_.empty() || sync_owed_) {
      dirty_ = false;
      // A response's end state waiting in the queue: this index is put without the sync (fsync of every value and
      // folder written since the last one, tens of ms for tens of MiB), which follows that state's own index, so
      // that it is visible to a restart as soon as possible. Durability against a power cut comes a little later.
      const bool sync = urgent_queued_ == 0;
      std::vector<Deletion> gone = std::move(deletions_);
      deletions_.clear();
      for (Deletion& d : undeleted_) gone.push_back(std::move(d));  // a retry of the deletes that failed
      undeleted_.clear();
      std::vector<std::chrono::steady_clock::time_point> named = std::move(awaiting_index_);
      awaiting_index_.clear();
      busy_ = true;
      lock.unlock();
      std::chrono::steady_clock::time_point visible{};
      const bool indexed = WriteIndex(&visible, sync);
      const auto now = std::chrono::steady_clock::now();
      DeleteValues(std::move(gone));
      lock.lock();
      busy_ = false;
      sync_owed_ = !sync;
      if (!indexed) awaiting_index_.insert(awaiting_index_.begin(), named.begin(), named.end());
      for (const auto& t : named)  // urgent checkpoints now survive a process crash
        if (indexed) awaiting_sync_.push_back({t, std::chrono::duration<double>(visible - t).count()});
      for (const Unsynced& u : awaiting_sync_) {  // and, synced, a power loss
        if (!indexed || !sync) break;
        const double s = std::chrono::duration<double>(now - u.queued_at).count();
        ++stats_.durable_count;
        stats_.durable_seconds_sum += s;
        stats_.durable_seconds_max = std::max(stats_.durable_seconds_max, s);
        stats_.visible_seconds_sum += u.visible_seconds;
        stats_.visible_seconds_max = std::max(stats_.visible_seconds_max, u.visible_seconds);
      }
      if (indexed && sync) awaiting_sync_.clear();
    }
    if (queue_.empty() && !dirty_ && deletions_.empty() && !sync_owed_) {
      idle_cv_.notify_all();
      if (stop_) return;
    }
  }
}

}  // namespace rw::memory
