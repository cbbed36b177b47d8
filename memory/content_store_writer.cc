// ContentStore's writer thread (memory/content_store.h): it takes the queued checkpoints, urgent ones (a finished
// response's end state) first, writes their values, then the index naming them, then syncs; and it tells callers
// waiting for a state (WaitVisible) when a restart after a process crash would find it.
#include <algorithm>
#include <optional>

#include "base/check.h"
#include "base/log.h"
#include "memory/content_store.h"

namespace rw::memory {
namespace {

// Repeated failures (a full disk) are logged at the 1st, 2nd, 4th, 8th... occurrence.
bool IsPowerOfTwo(uint64_t n) { return n != 0 && (n & (n - 1)) == 0; }

}  // namespace

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
  auto count_error = [&](const char* what) {  // mu_ held
    if (IsPowerOfTwo(++stats_.write_errors)) LOG_WARN("cache store: index %s: %s", what, s.error().ToString().c_str());
  };
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (s.ok()) {
      if (visible_at) *visible_at = std::chrono::steady_clock::now();
      stats_.index_bytes = static_cast<int64_t>(index.size());
      visible_snapshot_ = std::max(visible_snapshot_, snapshot);
    } else {
      failed_snapshot_ = std::max(failed_snapshot_, snapshot);
      count_error("not written");
    }
  }
  visible_cv_.notify_all();  // responses waiting for their end state (WaitVisible) go on now
  if (!s.ok() || !sync) return s.ok();
  s = backend_->Sync();
  if (!s.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    count_error("not synced");
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
