// The disk tier's content-addressed store (docs/cache-budget.md, "Disk tier"). Attention pages are stored once,
// named by the chained hash of the token prefix they end (memory/store_format.h), and shared by every checkpoint
// and conversation containing them; recurrent states are named by their exact prefix. A conversation of n
// tokens therefore costs its pages once plus one state per checkpoint: disk bytes grow linearly with its length.
//
// Writes happen on the store's own writer thread (content_store_writer.cc): the engine copies a checkpoint's bytes into a bounded queue
// (Enqueue) and never waits for the disk. The writer puts the values, then the index naming them; a crash loses
// at most what was queued, and a value the index names was complete before the index was written. At start, the
// index is read (one small value: 48 bytes per page or state) and values no index names are deleted.
//
// Eviction follows the RAM tier's scoring function (memory/eviction.h): prefill tokens a state saves per byte,
// aged by the store's clock of writes and hits. Over the byte bound, the lowest-scoring states go first, unless
// the incoming one scores lower still (then it is not kept); a page goes when no stored state needs it.
// The bound covers everything in the folder: the values, the index, and values evicted whose delete failed (they
// stay counted, and are retried after every write, until they are gone), so the folder never holds more than
// max_bytes: the values a checkpoint evicts are deleted (after an index without them) before it is written. A
// store reopened with a smaller bound evicts down to it at start. Failed deletes and dropped writes are counted and logged once per
// incident (the first failure after a success, then the recovery).
//
// Thread safety: every public member may be called from any thread. The backend is used by the writer thread and
// by the Read* calls (a request's own thread, on a miss: engine/hybrid_cache.h FetchDisk): it must accept calls
// from several threads.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <string_view>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/expected.h"
#include "memory/store_backend.h"
#include "memory/store_format.h"

namespace rw::memory {

struct ContentStoreConfig {
  uint64_t identity = 0;            // StoreIdentity(...)
  int32_t page_tokens = 32;
  int64_t kv_bytes_per_token = 0;   // for the eviction score of a state (the pages it alone needs)
  int64_t max_bytes = 0;            // bound on the stored values (0: none)
  int64_t queue_bytes = int64_t{512} << 20;  // bound on the bytes waiting for the writer
  int64_t half_life = 1024;         // eviction aging, in store clock ticks
};

// One checkpoint to store: its prefix, state, and the rows of the pages the store lacks (MissingPages).
struct StorePut {
  std::vector<int32_t> tokens;                          // [0, end)
  std::string_view state;                    // valid while state_owner lives
  std::shared_ptr<const void> state_owner;   // a checkpoint's buffer, shared (tens of MiB: never copied)
  std::vector<std::pair<int32_t, std::string>> pages;   // (page end, [layer][K | V][rows][row bytes])
  int64_t saved_tokens = 0;                             // end minus the previous checkpoint on its path
};

// What became of a state a caller waits for (ContentStore::WaitVisible).
enum class Visibility {
  kVisible,    // its value and an index naming it are in place: a restart after a process crash serves it
  kNotStored,  // not stored after all (not worth its bytes, a write or index error, evicted) or not queued
  kTimedOut,   // still queued or being written at the deadline
};

struct ContentStoreStats {
  int64_t stored_bytes = 0, states = 0, pages = 0;
  int64_t queued_bytes = 0, queued = 0;
  uint64_t written = 0, dropped_queue_full = 0, dropped_score = 0, evicted = 0, write_errors = 0, read_errors = 0;
  uint64_t dropped_no_room = 0;   // not written: evicted values could not be deleted to make room
  uint64_t delete_errors = 0;     // deletes the backend refused (each retried later)
  int64_t undeleted_bytes = 0;    // bytes of evicted values still on the medium (counted against max_bytes)
  int64_t index_bytes = 0;        // the index's size
  // Urgent checkpoints: how long from Enqueue until named by an index a restart after a process crash reads
  // (visible), and until values and index are synced (durable against power loss).
  uint64_t durable_count = 0;
  double durable_seconds_sum = 0, durable_seconds_max = 0;
  double visible_seconds_sum = 0, visible_seconds_max = 0;
};

class ContentStore {
 public:
  // Reads the index (a missing one is an empty store; a corrupt or foreign one is logged and replaced) and
  // starts the writer, whose first task is sweeping values the index does not name.
  static Expected<std::unique_ptr<ContentStore>> Open(std::unique_ptr<StoreBackend> backend,
                                                      const ContentStoreConfig& config);
  ~ContentStore();  // writes what is queued, then stops
  ContentStore(const ContentStore&) = delete;
  ContentStore& operator=(const ContentStore&) = delete;

  // Stored or queued.
  bool HasState(std::span<const int32_t> prefix) const;
  // Ends of the pages covering [0, prefix.size()) that are neither stored nor queued, ascending.
  std::vector<int32_t> MissingPages(std::span<const int32_t> prefix) const;
  // Queues a checkpoint; false (counted, nothing queued) when the queue is over its byte bound. `urgent` (the
  // state at a finished response's end, where the next turn resumes) goes ahead of every non-urgent checkpoint,
  // so that a crash right after a response loses as little as possible; the time from here until an index
  // naming it is durable is measured (ContentStoreStats::durable_*).
  bool Enqueue(StorePut put, bool urgent = false);

  // Ends of stored states serving prompt[0, end) with after < end <= up_to, deepest first (by hash; reads
  // verify the tokens).
  std::vector<int32_t> StatesOnPath(std::span<const int32_t> prompt, int32_t after, int32_t up_to) const;
  // The state after `prefix`, validated against it; counts as a use for eviction.
  Expected<std::string> ReadState(std::span<const int32_t> prefix);
  // Rows of the pages of `prefix` with index >= from_page ([first, end) each, first = ((end-1)/P)*P), validated
  // against the prefix's tokens.
  Expected<std::vector<std::string>> ReadPages(std::span<const int32_t> prefix, int32_t from_page);
  // A state found unusable (corrupt value, missing page): dropped from the index, its value deleted.
  void Forget(std::span<const int32_t> prefix);

  // Blocks the caller until the state named (end, Chain(prefix)) is visible to a restarted process (its value and
  // an index naming it are in place; not yet synced), is known not to be stored, or the deadline passes. For a
  // response's end state (engine/engine.h PersistTicket); never called on the engine thread.
  Visibility WaitVisible(int32_t end, uint64_t chain, std::chrono::steady_clock::time_point deadline);

  // Blocks until everything queued is written and the index is current (shutdown, tests).
  void Flush();
  ContentStoreStats Stats() const;
  // Every stored state as (end, chain c(end), bytes), for views (the web page's memory view).
  struct StateInfo {
    int32_t end = 0;
    uint64_t chain = 0, bytes = 0;
  };
  std::vector<StateInfo> States() const;
  // c(n) of a prefix: the name of its state.
  uint64_t Chain(std::span<const int32_t> prefix) const;
  const StoreBackend& backend() const { return *backend_; }

 private:
  struct Key {
    int32_t end = 0;
    uint64_t chain = 0;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const { return static_cast<size_t>(k.chain ^ (uint64_t(uint32_t(k.end)) << 32)); }
  };
  struct PageRec {
    uint64_t parent = 0, bytes = 0;
    int32_t refs = 0;
  };
  struct StateRec {
    uint64_t bytes = 0, last_use = 0;
    int64_t saved_tokens = 0;
    uint64_t since = 0;  // index_snapshots_ when it was stored: named by every index snapshot after that one
  };
  struct Job {
    StorePut put;
    int64_t bytes = 0;
    bool urgent = false;
    std::chrono::steady_clock::time_point queued_at{};
  };
  struct Deletion {
    std::string key;
    uint64_t bytes = 0;
  };

  ContentStore(std::unique_ptr<StoreBackend> backend, const ContentStoreConfig& config)
      : backend_(std::move(backend)), cfg_(config) {}
  int32_t FirstOf(int32_t end) const { return ((end - 1) / cfg_.page_tokens) * cfg_.page_tokens; }
  // c(n) for every n in `ends` (ascending) over `tokens`.
  std::vector<uint64_t> Chains(std::span<const int32_t> tokens, std::span<const int32_t> ends) const;
  std::vector<int32_t> PageEnds(int32_t end) const;
  // Walks the pages a state needs; false when one is not stored. delta: added to each page's refs.
  bool WalkPages(Key state, int delta);
  // mu_ held: removes a state (and the pages only it needed), returning the keys to delete.
  void DropState(Key key, std::vector<Deletion>* deletions);
  // mu_ held: drops the lowest-scoring states until `incoming` more bytes in `entries` more index entries fit
  // the bound, or until the lowest scores at least `floor` (then false: the incoming value is not worth a place).
  bool MakeRoom(uint64_t incoming, size_t entries, double floor);
  // Bytes the folder holds besides new values: stored values, the index, undeleted values. mu_ held.
  int64_t HeldBytes(size_t extra_entries) const;
  // Deletes `gone` (mu_ not held); failures are kept for a retry and counted.
  void DeleteValues(std::vector<Deletion> gone);
  void Load();
  void Sweep();
  void WriterLoop();
  void Process(Job& job);
  // mu_ not held; false when the index was not written or not synced. `visible_at`: when the index was in place
  // (what a restart after a process crash reads), before the sync. sync=false: the values and index are left for
  // a later sync (an urgent checkpoint is waiting to be made visible first).
  bool WriteIndex(std::chrono::steady_clock::time_point* visible_at = nullptr, bool sync = true);
  double Score(int64_t saved, uint64_t bytes, uint64_t last_use) const;

  std::unique_ptr<StoreBackend> backend_;
  ContentStoreConfig cfg_;

  mutable std::mutex mu_;
  std::condition_variable cv_, idle_cv_;
  std::unordered_map<Key, PageRec, KeyHash> pages_;
  std::unordered_map<Key, StateRec, KeyHash> states_;
  std::unordered_map<Key, int32_t, KeyHash> queued_pages_, queued_states_;
  std::deque<Job> queue_;   // urgent jobs first (urgent_queued_ of them), each part in order
  size_t urgent_queued_ = 0;
  std::vector<std::chrono::steady_clock::time_point> awaiting_index_;  // urgent jobs written, index not yet
  struct Unsynced {
    std::chrono::steady_clock::time_point queued_at;
    double visible_seconds = 0;
  };
  std::vector<Unsynced> awaiting_sync_;  // urgent jobs named by an index in place, not synced yet
  bool sync_owed_ = false;               // an index was put without the sync that makes it durable
  // Index snapshots taken (WriteIndex), the last one in place, the last one that failed: a state whose `since` is
  // below visible_snapshot_ is named by the index a restart reads. Both start at 1: loaded states are visible.
  uint64_t index_snapshots_ = 1, visible_snapshot_ = 1, failed_snapshot_ = 0;
  std::condition_variable visible_cv_;   // a state became visible, or will not be (WaitVisible)
  std::vector<Deletion> deletions_;  // values to delete once an index without them is written
  std::vector<Deletion> undeleted_;  // deletes that failed: retried after the next index write
  bool delete_failing_ = false;      // in a failed-delete incident (logged at its start and end)
  bool busy_ = false, dirty_ = false, stop_ = false, swept_ = false;
  uint64_t clock_ = 0;
  ContentStoreStats stats_;
  std::thread writer_;
};

}  // namespace rw::memory
