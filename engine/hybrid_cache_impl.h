// Private state of HybridCache (engine/hybrid_cache.h), shared by hybrid_cache.cc and hybrid_cache_persist.cc.
#pragma once

#include <algorithm>
#include <map>
#include <unordered_map>
#include <memory>
#include <vector>

#include "engine/hybrid_cache.h"
#include "memory/content_store.h"
#include "memory/memory_manager.h"
#include "memory/persist_format.h"
#include "model/forward.h"

namespace rw::engine {

// On a GPU (docs/gpu.md) the KV pages and the recurrent states live in device memory, the pages in a pool
// apart from the byte budget (MemoryConfig::pages_apart). Its size: want_bytes (--cache-device) when given,
// else every sequence's full context twice over; never more than the device holds beside the weights, `m`'s
// state slots, `reserved_bytes` held by others on the device (a draft model) and a reserve for the forwards
// (`forward_bytes`, Model::device_forward_bytes, and at least an eighth of the device), nor than one layer's page
// pool can bind (its storage buffer range). A clear error when that cannot be met or not even two pages fit.
// hybrid_cache_device.cc.
Expected<int32_t> DevicePagePool(const model::Model& model, const memory::MemoryConfig& m, kernels::KvTypes kv_type,
                                 int64_t want_bytes, int64_t reserved_bytes, int64_t forward_bytes,
                                 int32_t n_seq_max, int32_t n_ctx);

struct HybridCache::Impl {
  model::Model* model = nullptr;
  HybridCacheConfig cfg;
  // Longest lazy-rollback prefix fused into a forward: rollbacks in a row stack their rows; past this many the
  // slot is materialised first (a long prefix costs more inside the forward than one replay pass).
  static constexpr int32_t kMaxFusedRows = 4;
  std::unique_ptr<memory::MemoryManager> mm;
  std::unique_ptr<model::KvStorage> kv;
  std::unique_ptr<model::StateStorage> states;
  std::map<memory::CheckpointId, model::StateCheckpoint> ckpts;  // checkpoint buffers, by bookkeeping id
  std::map<memory::SlotId, model::ReplaySeqLog> logs;            // batch-start slot -> replay log of that batch
  // Lazy rollback (docs/checkpoints.md): a rollback through the replay log only records how many rows of the
  // slot's log its bytes still lack (`pending`); the next forward from that slot re-applies them inside each GDN
  // layer (BatchSeq::prefix), anything else that reads the slot first materialises them (Materialize). The
  // forward's own log then starts with those rows: `log_offset` says how many, so the bookkeeping's replay
  // counts (relative to its batch start) map to rows of the stored log.
  std::map<memory::SlotId, int32_t> pending;
  std::map<memory::SlotId, int32_t> log_offset;
  std::map<memory::SeqId, std::vector<int32_t>> planned;
  int32_t interval = 0;  // checkpoint spacing inside long spans (Create: from the state size, <= checkpoint_every)         // checkpoint positions still to snapshot
  uint64_t fingerprint = 0;
  // The disk tier (hybrid_cache_store.cc); null when off.
  std::shared_ptr<memory::ContentStore> store;  // shared: a PersistTicket holds it weakly
  // Value per byte at the door of the disk tier: a state is written only when it saves at least this many tokens
  // of prefill beyond the previous stored state of its path (the KV of 1/16 of its size; see OpenStore).
  int32_t disk_min_saved_tokens = 1;
  std::string kv_label;             // the KV types as persisted files name them ("f16", "q8_0/f16")
  memory::CheckpointKey FileKey() const { return {fingerprint, kv_label}; }
  // The remote tier (hybrid_cache_remote.cc); null when off.
  std::unique_ptr<remote::RemoteStore> remote;
  // GET /cache/tree (hybrid_cache_view.cc): each checkpoint's disk-tier key and remote presence, computed once
  // (hashing its token prefix) and kept while the checkpoint lives. Engine thread only.
  struct ViewKeys {
    uint64_t chain = 0;   // ContentStore::Chain of its prefix (0: no disk tier)
    bool remote = false;  // the remote tier knew its state when first looked at
  };
  std::unordered_map<memory::CheckpointId, ViewKeys> view_keys;

  struct Counters {
    uint64_t acquires = 0, evaluated_tokens = 0, evictions = 0, evicted_bytes = 0, checkpoints_saved = 0;
    uint64_t restores = 0, replays = 0, page_copies = 0, truncates = 0, persisted = 0, loaded = 0,
             remote_loaded = 0;
    uint64_t spilled = 0;
    uint64_t disk_loaded = 0;           // disk-tier states a request resumed from (imported from a FetchDisk)
    uint64_t disk_reads_on_engine = 0;  // of those, read on the engine thread (stalling every stream; expected 0)
    double disk_read_seconds = 0;       // time FetchDisk spent reading what was imported (off the engine thread)
    double disk_enqueue_seconds = 0;  // engine-thread time spent copying checkpoints into the disk writer's queue
    uint64_t fused_replays = 0, materialized = 0;  // lazy rollbacks: fused into a forward / applied separately
  } counters;
  int32_t kv_touched = 0;           // pages [0, kv_touched) may hold committed memory (lowest-id-first allocation)

  // Performs a committed plan's data operations on storage, in order.
  void Exec(const std::vector<memory::DataOp>& ops);
  // Applies a lazy rollback's pending rows to the slot's bytes (in place); no-op when none are pending.
  void Materialize(memory::SlotId slot);
  // Replay-log row buffers of dropped logs, kept for the next forwards (a prefill chunk's log is hundreds of MiB
  // at the 0.8B shape, 445 KiB per token: allocated fresh, every chunk and decode step paid its page faults and
  // the kernel's zeroing, about a tenth of a serving profile). Bounded: at most 2 * n_seq_max + 2 buffers and
  // twice the largest log a forward needed.
  std::vector<BigVector<float>> spare_rows;
  size_t spare_cap_floats = 0;
  // A buffer for a log of `floats` floats: the smallest spare that holds it (else a new, empty one).
  BigVector<float> TakeRows(size_t floats);
  void RecycleRows(BigVector<float>&& rows);
  // The slot's bytes are being replaced: its log and lazy-rollback records no longer apply.
  void ForgetSlot(memory::SlotId slot) {
    if (auto it = logs.find(slot); it != logs.end()) RecycleRows(std::move(it->second.rows));
    logs.erase(slot);
    pending.erase(slot);
    log_offset.erase(slot);
  }
  // Evicts until `bytes` of budget and `pages` pages are free. Fails (changing nothing) if impossible.
  Status MakeRoom(int64_t bytes, int32_t pages);
  // Commits an eviction plan, spilling its checkpoints to the disk tier first (when there is one).
  void Evict(const memory::EvictPlan& plan);
  // Hands the memory of free KV pages back to the OS, so resident memory follows the pages in use.
  void ReturnFreePages();
  void NoteTaken(std::span<const memory::PageId> pages) {
    for (memory::PageId id : pages) kv_touched = std::max(kv_touched, id + 1);
  }
  // Disk tier: opens the store in cfg.disk_dir (logs and stays off on failure).
  void OpenStore();
  // Queues checkpoint `ckpt` (the state after `prefix`, whose page table is `pages`) and the pages the store lacks;
  // false when it is stored already, or the queue is full. Copies only: never waits for the disk.
  // `urgent`: ahead of the queue (the end of a finished response).
  bool PersistCheckpoint(std::span<const int32_t> prefix, memory::CheckpointId ckpt,
                         std::span<const memory::PageId> pages, int64_t saved_tokens, bool urgent = false);
  // The value a tier stores for checkpoint `ckpt`: its tokens, state and the rows of the pages ending at page_ends.
  memory::StorePut MakePut(std::span<const int32_t> prefix, memory::CheckpointId ckpt,
                           std::span<const memory::PageId> pages, std::span<const int32_t> page_ends,
                           int64_t saved_tokens) const;
  // A checkpoint a tier's queue refused (counted by the tier): logged at the start and end of each incident.
  void NoteDropped(bool dropped, const char* tier, int32_t end);
  bool disk_drop_incident = false, remote_drop_incident = false;
  // The value-per-byte door of the disk and remote tiers (cfg.disk_min_saved_tokens, else from the state size).
  int32_t MinSavedTokens() const;
  // The remote tier's twin of PersistCheckpoint (hybrid_cache_remote.cc shares nothing else on the write side).
  bool ShareCheckpoint(std::span<const int32_t> prefix, memory::CheckpointId ckpt,
                       std::span<const memory::PageId> pages, int64_t saved_tokens);
  // Queues every checkpoint on the tree path of `tokens` that the store lacks; returns the ticket of the deepest
  // one the disk tier stores or queued (null: none).
  std::shared_ptr<const PersistTicket> PersistPath(std::span<const int32_t> tokens, std::span<const int32_t> branch);
  // Queues the checkpoints an eviction is about to drop.
  void Spill(const memory::EvictPlan& plan);
  // Snapshots the live state at the sequence's position (evicting if needed). Best effort: false if no room.
  bool Checkpoint(memory::SeqId seq);
  // Writes KV rows and a state into a freshly appended sequence (persistence import instead of a forward).
  // kv_bytes holds the pages [first_page, ceil(len/P)): the cache must already serve the prefix before them.
  Expected<int32_t> Import(std::span<const int32_t> tokens, std::span<const float> state, std::string_view kv_bytes,
                           int32_t first_page = 0);
  // Imports a state (and pages) a tier read off the engine thread (FetchDisk, FetchRemote) when it serves more
  // of `prompt` than RAM does now; returns the position (0: nothing to import) or the import's error (logged).
  Expected<int32_t> ImportFetched(std::span<const int32_t> prompt, int32_t end, int32_t first_page, const std::string& state,
                        std::span<const std::string> pages, const char* tier);
  // Disk tier: imports what FetchDisk read (counted; an unusable state is dropped from the store).
  int32_t ImportDisk(std::span<const int32_t> prompt, const DiskFetch& fetch);
  // Imports a stored checkpoint (a tier's values): the state's bytes and the page payloads
  // [from_page, ceil(prefix / P)), each [layer][K rows | V rows]. kCorrupt when the sizes do not fit.
  Expected<int32_t> ImportStored(std::span<const int32_t> prefix, const std::string& state,
                                 std::span<const std::string> pages, int32_t from_page);
  // Remote tier: opens it (logs and stays off on a bad URL); imports what FetchRemote brought when it serves
  // more of `prompt` than RAM does now (returns the position, 0: nothing imported).
  void OpenRemote();
  int32_t ImportRemote(std::span<const int32_t> prompt, const remote::RemoteFetch& fetch);
};

}  // namespace rw::engine
