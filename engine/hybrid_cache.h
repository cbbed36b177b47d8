// HybridCache: the glue between memory/ bookkeeping (MemoryManager: plans, no tensors) and the storage of the
// model (KvStorage pages, StateStorage slots, checkpoint buffers, replay logs). It executes every plan's data
// operations on storage and runs the model's forward for the engine.
//
// INTERFACE FIXED BY THE LEAD: engine_impl.cc programs against exactly these declarations. The implementation
// (hybrid_cache.cc) belongs to the memory engineer; private members may be added freely, public signatures not.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "base/expected.h"
#include "engine/engine.h"
#include "memory/ids.h"
#include "model/forward.h"
#include "remote/remote_store.h"

namespace rw::engine {

struct HybridCacheConfig {
  int64_t budget_bytes = 0;       // pages + checkpoints in RAM, never exceeded (docs/cache-budget.md); on a GPU
                                  // the checkpoints alone (the pages are device memory)
  int64_t device_bytes = 0;       // on a GPU: the KV page pool in device memory (0: every sequence's full context
                                  // twice over, at most what the device holds)
  int64_t device_reserved_bytes = 0;  // on a GPU: device memory others on it hold at most (a draft model), which
                                      // the derived page pool leaves free
  int32_t forward_rows = 512;      // on a GPU: the most rows a forward runs (--batch-size) and, of them, the most
  int32_t forward_out_rows = 4;    // with logits (a token per sequence, or its draft to verify), which the
                                   // derived page pool leaves room for (Model::device_forward_bytes)
  int32_t page_tokens = 32;
  model::KvTypes kv_type = model::KvType::kF16;  // K and V element types (kernels/kv_quant.h)
  int32_t n_seq_max = 4;          // concurrent live sequences (each may hold 2 state slots)
  int32_t n_ctx = 4096;           // per-sequence context limit
  int32_t checkpoint_every = 1024;// placement: every N tokens inside long spans (0 = off)
  bool use_cache = true;          // false: nothing is reused or inserted (--no-cache)
  std::string disk_dir;           // "" = no disk tier
  int64_t disk_bytes = 0;
  int64_t disk_queue_bytes = int64_t{512} << 20;  // checkpoints waiting for the disk writer (beyond: not kept)
  int32_t disk_min_saved_tokens = -1;  // a state goes to disk if it saves this much prefill (-1: from its size)
  std::string remote_url;         // "" = no remote tier; redis://HOST:PORT[/DB] (docs/replicas.md)
  int64_t remote_ttl_s = 0;       // expiry of values written to the remote tier (0: none)
  int64_t remote_wait_ms = 1000;  // wait for a state another replica announced (0: never)
  int64_t remote_queue_bytes = int64_t{256} << 20;  // checkpoints waiting for the remote writer
  std::string remote_mac_key;     // authenticates remote values (HMAC-SHA256); "" needs remote_trust
  bool remote_trust = false;      // no key: values are sealed and checked with an empty key (no authentication)
  int64_t remote_max_fetch_bytes = int64_t{1} << 30;  // bytes one remote lookup may read
  remote::TlsOptions remote_tls;  // rediss:// URLs: CA store, client certificate
  bool lazy_rollback = true;      // replay-log rollbacks are fused into the next forward (docs/checkpoints.md)
};

// A live sequence acquired for a request.
struct AcquireResult {
  memory::SeqId seq = memory::kNone;
  int32_t resume_pos = 0;         // tokens [0, resume_pos) of the prompt are already evaluated
  CacheReport report;             // lcp, resume_pos, source, extra_tokens, reason (I4)
};

// One item of an evaluation batch: append `tokens` to `seq` and compute logits.
struct EvalItem {
  memory::SeqId seq = memory::kNone;
  std::span<const int32_t> tokens;
  bool all_logits = false;        // logits for every token, else only the last
  bool no_logits = false;         // none (a prefill chunk that does not end the prompt)
  const model::SeqImages* images = nullptr;  // the sequence's images (ids >= n_vocab allowed inside their spans)
};

struct TruncateResult {
  int32_t resume_pos = 0;         // exact state position after the rollback
  std::vector<int32_t> refeed;    // tokens [resume_pos, n) the caller must evaluate again (empty when exact)
  std::string source;             // "live" | "checkpoint" | "replay" | "none"
};

// What FetchDisk read from the disk tier for one prompt, on the request's thread: the state after prompt[0, end)
// and the pages [first_page, ceil(end / P)), each [attention layer][K rows | V rows]. Acquire imports it (memory
// copies only) when it still serves more than RAM does.
struct DiskFetch {
  int32_t end = 0;  // 0: nothing read
  int32_t first_page = 0;
  std::string state;
  std::vector<std::string> pages;
  std::thread::id reader;  // the thread that read it (a read on the engine thread is counted: it stalls the batch)
  double seconds = 0;      // index lookup + reads + checks
};

// Identity of a model file for persisted caches: metadata, tensor layout and sampled weight bytes.
uint64_t ModelFingerprint(const gguf::File& file);

class HybridCache {
 public:
  static Expected<std::unique_ptr<HybridCache>> Create(model::Model& model, const HybridCacheConfig& config);
  ~HybridCache();

  // Finds the reusable prefix of `prompt` (hybrid hit rule, strictly before the prompt's end), leases it and
  // builds a live sequence whose state is exact at resume_pos. `checkpoint_hints` are positions worth a
  // checkpoint (message starts, generation header, client requests); the cache adds its own placement
  // (every N tokens, observed branch points) and snapshots them while later Evaluate calls cross them.
  // reserve_tokens: the length the sequence may reach (prompt + generation); the budget holds its pages back
  // (admission control), so its appends up to there always find room. kResourceExhausted (nothing changed)
  // while the running sequences' reservations leave too little room: retry when one ends. With no other
  // reservation the request is always admitted (without reusing the cache if pinning it would not fit).
  // kOutOfRange when reserve_tokens > MaxSequenceTokens(). 0: no reservation (appends may then fail).
  // `disk`: what FetchDisk read for this prompt, `remote`: what FetchRemote brought (null: none); each is
  // imported when it serves more than RAM (and, for the remote tier, the disk tier) does. Acquire itself never
  // reads the disk or the network.
  Expected<AcquireResult> Acquire(std::span<const int32_t> prompt, std::span<const int32_t> checkpoint_hints,
                                  bool use_cache, int32_t reserve_tokens = 0,
                                  const remote::RemoteFetch* remote = nullptr, const DiskFetch* disk = nullptr);

  // The disk tier: reads the deepest stored state serving `prompt` deeper than RAM does, with its pages from
  // RAM's resume position on. Blocking (file reads and checksums) and thread-safe: call it on the request's own
  // thread, never on the engine thread. `ram_resume` says how much of the prompt RAM serves now (asked only when
  // the disk index holds a state on the prompt's path; it runs on the engine thread, e.g. through a task).
  // Null when the tier is off or holds nothing deeper; a corrupt value is dropped from the store and the next
  // deepest tried.
  std::shared_ptr<const DiskFetch> FetchDisk(std::span<const int32_t> prompt,
                                             const std::function<int32_t()>& ram_resume) const;
  bool has_disk() const;
  // How many tokens of `prompt` RAM serves (the resume position of the hybrid hit rule). Engine thread only.
  int32_t RamResume(std::span<const int32_t> prompt) const;

  // The remote tier: asks it for a checkpoint of `prompt` at the positions this cache would checkpoint (the
  // hints, the regular spacing, the end of a previous turn just before a message start), deeper than the disk
  // tier holds, with the pages from there on. Blocking (network) and thread-safe: call it on the request's own
  // thread, never on the engine thread. Null when the tier is off. `generation_start` (GenerationRequest's, -1 if
  // unknown) is announced to other replicas as a state this request will share when it is released.
  std::shared_ptr<const remote::RemoteFetch> FetchRemote(std::span<const int32_t> prompt,
                                                         std::span<const int32_t> checkpoint_hints,
                                                         int32_t generation_start = -1) const;
  bool has_remote() const;

  // The longest sequence (tokens) whose reservation fits in the budget.
  int32_t MaxSequenceTokens() const;

  // The largest number of tokens, starting at the sequence's current position, that may go into one batch
  // before the next planned checkpoint position (so prefill chunks end exactly there). >= 1.
  int32_t MaxChunk(memory::SeqId seq, int32_t want) const;

  // Appends and evaluates tokens of several sequences in ONE model forward (continuous batching). Allocates
  // pages (evicting if needed; fails cleanly, changing nothing, if impossible), records the replay log,
  // snapshots checkpoints at planned positions reached. out->Row(out->seq_first_row[i] + j) are item i's rows.
  // hidden_all: also fill out->hidden_all (every token's final normed hidden row, batch order; for MTP).
  // top_k > 0: out->Top(r) holds each row's best top_k (logit, id) pairs instead of the logits rows
  // (model::ForwardOptions::top_k; a GPU downloads only the pairs).
  Status Evaluate(std::span<const EvalItem> items, model::ForwardOutput* out, bool hidden_all = false,
                  int32_t top_k = 0);

  // Exact rollback to n (speculative rejection, edits): see memory::MemoryManager::PlanTruncate.
  Expected<TruncateResult> Truncate(memory::SeqId seq, int32_t n);

  // Current evaluated length of a sequence.
  int32_t Position(memory::SeqId seq) const;

  // Ends a sequence. insert=true leaves its tokens, pages and a final-state checkpoint in the prefix tree, and
  // queues its checkpoints for the disk and remote tiers. `branch` (the prompt up to the answer's message start,
  // GenerationRequest::generation_start; empty if unknown) is a state the remote tier always shares, or withdraws
  // the announcement of (FetchRemote) when there is none. Returns the disk tier's ticket for the deepest state of
  // the sequence's path it keeps (the end state, queued ahead of everything else), null when none (no disk tier,
  // insert=false, nothing on the path worth its bytes).
  std::shared_ptr<const PersistTicket> Release(memory::SeqId seq, bool insert, std::span<const int32_t> branch = {});

  // Queues the in-RAM cache's checkpoints (those worth their disk bytes) and waits until the writer has written them
  // (shutdown, tests). Finished requests and evictions queue theirs without waiting; Create reads the index.
  Status Persist();

  // llama-server slot files: the sequence's tokens + state + KV in one checksummed file / back.
  Expected<uint64_t> SaveSequence(memory::SeqId seq, const std::string& path);
  // Restores a saved sequence file into the prefix tree (so the next request with that prefix resumes there).
  Expected<int32_t> LoadIntoTree(const std::string& path);

  std::string StatsJson() const;     // GET /cache: tree size, checkpoints, bytes per tier
  std::string MetricsText() const;   // Prometheus lines (rewind_cache_*)
  // GET /cache/tree in two halves (hybrid_cache_view.cc). TreeSnapshot runs on the engine thread and copies
  // ids, positions and sizes of at most `max_nodes` tree nodes and the running sequences; a checkpoint's tier
  // keys (the hash of its token prefix) are computed once per checkpoint and remembered, at most
  // `max_new_hashes` per call, so a call costs O(max_nodes) plus a bounded number of prefix hashes.
  // TreeViewJson turns a snapshot into the JSON (tree nodes, sequences, disk-only files) on any thread.
  struct TreeView;
  std::shared_ptr<const TreeView> TreeSnapshot(int32_t max_nodes, int32_t max_new_hashes);
  std::string TreeViewJson(const TreeView& view) const;

 private:
  friend class HybridCacheTestPeer;  // engine/exact_test.cc: invariant checks and evict-all
  HybridCache() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rw::engine
