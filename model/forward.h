// The model: configuration, weights and the forward pass over a batch of sequences. The engine and the memory
// system drive it through plain structs; they never touch layers.
//
// Invariant I1: the logits of a token depend only on the token prefix. Every output element is computed by one
// code path whatever the batch composition, the micro-batch split, the start position or the thread count.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/big_buffer.h"
#include "base/expected.h"
#include "gguf/gguf.h"
#include "kernels/thread_pool.h"
#include "kernels/top_logits.h"
#include "model/config.h"
#include "model/image_positions.h"
#include "model/kv_storage.h"
#include "model/state_storage.h"
#include "model/weights.h"

namespace rw::model {

// One sequence's part of a batch: tokens at positions [pos0, pos0 + tokens.size()).
struct ReplaySeqLog;

// What a device backend did so far (all zero on the CPU): dispatches recorded, submissions the host waited for,
// batches it submitted without waiting (the device runs them while the host records on), the seconds the
// host waited for the device (`rewind bench --device`), and the barriers recorded between commands.
struct DeviceCounters {
  uint64_t dispatches = 0, submissions = 0, batches = 0;
  double wait_seconds = 0;
  uint64_t barriers = 0;
};

// Device time of one kernel (Model::TakeDeviceProfile): its runs and the seconds they took.
struct DeviceProfileRow {
  std::string name;
  uint64_t count = 0;
  double seconds = 0;
};

struct BatchSeq {
  // Recurrent state: read from slot state_in, written to slot state_out. state_in may differ from state_out:
  // state_in is then left untouched (the state before the batch stays available for exact rollback). -1 = start
  // from the zero state (a new sequence).
  int32_t state_in = -1;
  int32_t state_out = 0;
  // Page table: position p lives in page pages[p / page_size], row p % page_size. Must cover [0, pos0 + n).
  std::span<const int32_t> pages;
  int32_t pos0 = 0;
  std::span<const int32_t> tokens;
  bool all_logits = false;  // logits for every token, else only for the last one
  // Lazy rollback: state_in holds the state `prefix_rows` tokens before pos0, and the first prefix_rows rows of
  // `prefix` (the replay log of the batch that started from it) are re-applied to it before the tokens, inside
  // each GDN layer's update, while that layer's state is in cache. Same arithmetic as ReplayState, then the
  // batch: the same bits as a rollback followed by this forward. Requires state_in >= 0.
  const ReplaySeqLog* prefix = nullptr;
  int32_t prefix_rows = 0;
  bool no_logits = false;  // no output row at all (a prefill chunk before the prompt's end): saves the LM head
  // Images of this sequence (null: none): tokens inside a span take the span's embedding rows as input (their
  // ids may then be >= n_vocab: content-keyed placeholders) and every token its M-RoPE position
  // (model/image_positions.h); the KV row of a token stays pos0 + j.
  const SeqImages* images = nullptr;
};

// Where a replay log's rows live when a forward backend keeps them on its device (the Vulkan backend's
// DeviceReplayRows, model/gpu_storage.h): in the host layout below, in a device buffer only the backend reads.
// Whoever holds a log (the engine's hybrid cache, a drafter) hands it to Forward (BatchSeq::prefix) and
// ReplayState, trims it (Truncate) and appends to it (Model::AppendReplay) without learning where the bytes are.
class ReplayDevice {
 public:
  virtual ~ReplayDevice() = default;
  virtual uint64_t capacity_floats() const = 0;  // rows it can hold (n_tokens · replay floats per token at most)
};

// Per-token inputs of the GDN state update, recorded by Forward when ForwardOptions::replay is set.
struct ReplaySeqLog {
  int32_t n_tokens = 0;
  // The CPU forward's rows: [token][gdn_layer][C (raw qkv, pre-conv) | b (Hv) | a (Hv)]; resize leaves it
  // uninitialised. A device backend leaves it empty (its capacity kept for reuse) and records into `device`.
  BigVector<float> rows;
  std::unique_ptr<ReplayDevice> device;  // the rows on the backend's device, same layout; null: host rows
  // Keeps the first k logged tokens (k <= n_tokens).
  void Truncate(int32_t k) {
    if (device == nullptr) rows.resize(n_tokens > 0 ? rows.size() / n_tokens * k : 0);
    n_tokens = k;
  }
};
struct ReplayLog {
  std::vector<ReplaySeqLog> seqs;  // one per BatchSeq, in batch order
};

struct ForwardOptions {
  // Record the replay log (from state_in: a BatchSeq's prefix rows come first). Row buffers already in
  // replay->seqs are reused (their capacity; the contents are overwritten).
  ReplayLog* replay = nullptr;
  bool want_hidden = false;     // also return the final normed hidden rows of the output rows (for MTP)
  bool hidden_all = false;      // ForwardOutput::hidden_all: the final normed hidden row of EVERY token
  // > 0: instead of the logits rows, ForwardOutput::top holds each output row's top_k best (logit, token id)
  // pairs (min(top_k, n_vocab) of them), descending logit, ties to the lower id, NaN as -inf
  // (kernels::TopLogits). A device backend selects them on the device and downloads only the pairs; the CPU
  // computes the same pairs. At most kernels::kMaxTopLogits.
  int32_t top_k = 0;
};

struct ForwardOutput {
  int32_t n_vocab = 0;
  int32_t n_embd = 0;
  std::vector<float> logits;         // [n_rows][n_vocab] (empty when top_k > 0)
  int32_t top_k = 0;                 // pairs per row in `top` (ForwardOptions::top_k clamped to n_vocab), or 0
  std::vector<kernels::TopLogit> top;  // [n_rows][top_k] when ForwardOptions::top_k > 0
  std::vector<float> hidden;         // [n_rows][n_embd] when want_hidden
  std::vector<float> hidden_all;     // [n_tokens in batch order][n_embd] when hidden_all
  std::vector<int32_t> row_seq;      // [n_rows] index into the batch
  std::vector<int32_t> row_pos;      // [n_rows] position of the token whose next-token logits the row holds
  std::vector<int32_t> seq_first_row;// [n_seqs] first output row of each sequence

  std::span<const kernels::TopLogit> Top(int32_t r) const {
    return {top.data() + static_cast<size_t>(r) * top_k, static_cast<size_t>(top_k)};
  }
  std::span<const float> Row(int32_t r) const {
    return {logits.data() + static_cast<size_t>(r) * n_vocab, static_cast<size_t>(n_vocab)};
  }
};

struct LoadOptions {
  int32_t n_threads = 1;
  int32_t device = -1;        // -1: the CPU; N: run the forward on Vulkan device N (docs/gpu.md)
  int32_t n_gpu_layers = -1;  // with a device: layers on it; -1 = all; fewer than all is an error for now
};

class ForwardBackend;

class Model {
 public:
  static Expected<std::unique_ptr<Model>> Load(const std::string& path, const LoadOptions& options = {});
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;
  ~Model();

  const ModelConfig& config() const { return cfg_; }
  const Weights& weights() const { return w_; }
  const gguf::File& file() const { return *file_; }
  int32_t n_threads() const { return pool_->size(); }
  // The forward's thread pool, for work that runs between forwards on the same thread (a drafter).
  kernels::ThreadPool* pool() const { return pool_.get(); }
  void SetThreads(int32_t n_threads);
  // "cpu" or the device backend's name ("vulkan0"), and a line describing it (name, memory).
  std::string device_name() const;
  int32_t device_index() const;  // LoadOptions::device: -1 on the CPU, N on vulkanN
  std::string device_description() const;
  uint64_t device_bytes() const;  // bytes held on the device (0 on the CPU)
  // Device bytes a forward of `rows` rows (`out_rows` of them with logits) holds at most beyond the weights, KV
  // pages and states: activations, output rows and replay logs (0 on the CPU).
  uint64_t device_forward_bytes(int32_t rows, int32_t out_rows) const;
  std::string device_type() const;         // "cpu" on the CPU, else the Vulkan device's kind ("discrete", ...)
  uint64_t device_memory_total() const;    // the device's memory (0 on the CPU)
  uint64_t device_max_buffer_bytes() const;  // the largest buffer the device binds (0 on the CPU)
  // On a device: puts kv's pages and states' slots there, where the forward reads and writes them (a clear
  // error when they do not fit); on the CPU nothing. docs/gpu.md.
  Status PlaceStorage(KvStorage& kv, StateStorage& states);
  uint64_t device_kv_bytes() const;     // KV pages held on the device (0 on the CPU)
  uint64_t device_weights_bytes() const;  // this model's weights on the device (0 on the CPU)
  uint64_t device_state_bytes() const;  // recurrent states held on the device (0 on the CPU)

  // Storage shaped for this model.
  KvStorageConfig MakeKvConfig(int32_t n_pages, int32_t page_size = 32, KvTypes type = KvType::kF16) const;
  StateShape MakeStateShape() const;
  uint64_t ReplayBytesPerToken() const { return cfg_.ReplayBytesPerToken(); }

  // Runs the batch. Input errors (bad token id, slot, page table too short, conflicting state slots) are returned
  // before anything is written.
  Status Forward(std::span<const BatchSeq> batch, KvStorage& kv, StateStorage& states, ForwardOutput* out,
                 const ForwardOptions& options = {});

  // Rebuilds, in slot_out, the recurrent state the forward had after the first k tokens of `log`, starting from
  // the state in slot_in (the state before that forward's batch; -1 = zero state). Same arithmetic as Forward
  // (a shared function), no matmul: the result is bit-identical. slot_in == slot_out updates in place.
  Status ReplayState(int32_t slot_in, int32_t slot_out, const ReplaySeqLog& log, int32_t k,
                     StateStorage& states) const;
  // Appends the tokens of `tail` (a log of the same sequence recorded by this model's Forward, from the state
  // after dst's last token) to dst, where dst's rows live (on a device: a device copy).
  Status AppendReplay(ReplaySeqLog& dst, const ReplaySeqLog& tail) const;
  // Replay-log bytes uploaded to the device so far (0 on the CPU, whose logs are host rows; a device backend
  // records and reads its logs on the device and uploads only a log handed in as host rows). Tests, docs/gpu.md.
  uint64_t replay_bytes_to_device() const;
  DeviceCounters device_counters() const;
  // Bytes of weights one decode step reads: every tensor of the trunk and the head, the token embedding only when
  // it is the (tied) head, and of a stacked expert tensor the share of the n_expert_used experts a token uses.
  // `rewind bench` divides by it.
  uint64_t decode_weight_bytes() const;
  // On a device: time every kernel the forwards run from now on (a timestamp after each; docs/gpu.md
  // "Profiling"); an error on the CPU and on devices without timestamps.
  Status SetDeviceProfiling(bool on);
  // The device time by kernel since the last call (largest first), forgotten by the call.
  std::vector<DeviceProfileRow> TakeDeviceProfile();

 private:
  Model() = default;
  struct Scratch;

  std::unique_ptr<gguf::File> file_;
  ModelConfig cfg_;
  Weights w_;
  std::unique_ptr<kernels::ThreadPool> pool_;
  std::unique_ptr<ForwardBackend> backend_;  // null: the CPU forward in model.cc
};

}  // namespace rw::model
