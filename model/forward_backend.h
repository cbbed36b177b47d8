// The backend seam of the forward pass: Model::Forward validates a batch and resolves its rows on the host, then
// runs the layers on the CPU (model.cc) or hands them to a device backend chosen at load (--device). The memory
// policy (memory/) and the storage views the engine plans with (KvStorage, StateStorage) are the same for
// every backend. docs/gpu.md.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "base/expected.h"
#include "model/config.h"
#include "model/forward.h"
#include "model/layers.h"
#include "model/weights.h"

namespace rw::model {

class ForwardBackend {
 public:
  virtual ~ForwardBackend() = default;
  // "vulkan0", and a description with the device's name and memory.
  virtual std::string name() const = 0;
  virtual std::string description() const = 0;
  // Bytes this backend holds on its device (weights, activations, KV and state mirrors).
  virtual uint64_t device_bytes() const = 0;
  // Device bytes a forward of `rows` rows with `out_rows` output rows holds at most beyond the weights, the KV
  // pages and the states: activations, output rows and replay logs (the device page plan leaves them free).
  virtual uint64_t forward_bytes(int32_t rows, int32_t out_rows) const = 0;
  // The device's kind ("discrete", "integrated", "virtual", "cpu" for lavapipe, "other") and its memory (the
  // largest device-local heap).
  virtual std::string device_type() const = 0;
  virtual uint64_t device_memory_total() const = 0;
  // The largest buffer the device binds (its storage buffer range): a KV layer's page pool must fit in one.
  virtual uint64_t max_buffer_bytes() const = 0;
  // Puts the bytes of kv and states on the device (they live there from now on: model/gpu_storage.h); a clear
  // error when the device cannot hold them. Forward does it on first use too.
  virtual Status Place(KvStorage& kv, StateStorage& states) = 0;
  // Bytes of KV pages and of recurrent states on the device of the storages placed last (Place).
  virtual uint64_t device_kv_bytes() const = 0;
  virtual uint64_t device_weights_bytes() const = 0;  // this model's weights on the device
  virtual uint64_t device_state_bytes() const = 0;
  // A validated batch: seqs resolved to rows (N in all), new sequences' state slots already cleared, replay
  // (optional) with n_tokens set as Model::Forward sets it; the backend records the rows into each log's
  // `device` (its host rows stay empty). top_k > 0 (ForwardOptions::top_k, already clamped to n_vocab): fill
  // out->top (out->top_k = top_k) instead of out->logits, or leave out->top_k 0 and return the full rows (the
  // caller then selects on the host). Same contract as Model::Forward.
  virtual Status Forward(std::span<const BatchSeq> batch, std::span<const internal::SeqRun> seqs, int32_t N,
                         KvStorage& kv, StateStorage& states, ForwardOutput* out, ReplayLog* replay,
                         int32_t top_k) = 0;
  // Model::ReplayState on the device, with the kernels of Forward (validated arguments; slot_in -1 = zero state).
  virtual Status ReplayState(int32_t slot_in, int32_t slot_out, const ReplaySeqLog& log, int32_t k,
                             StateStorage& states) = 0;
  // Model::AppendReplay for a log whose rows live on this device (dst may be empty).
  virtual Status AppendReplay(ReplaySeqLog& dst, const ReplaySeqLog& tail) = 0;
  // Replay-log bytes uploaded (logs handed in as host rows).
  virtual uint64_t replay_bytes_to_device() const = 0;
  // Work the device was given so far (Model::device_counters).
  virtual DeviceCounters device_counters() const = 0;
  // Device time by kernel (Model::SetDeviceProfiling / TakeDeviceProfile).
  virtual Status SetProfiling(bool on) = 0;
  virtual std::vector<DeviceProfileRow> TakeProfile() = 0;
};

// Checks that the GPU backend can run this model (architecture, layer kinds, weight types: a clear error naming
// what it cannot) and uploads the weights, once, in their GGUF block formats. n_gpu_layers must cover every
// layer: partial offload is an error.
Expected<std::unique_ptr<ForwardBackend>> MakeVulkanBackend(const ModelConfig& cfg, const Weights& w,
                                                            int32_t device, int32_t n_gpu_layers);

}  // namespace rw::model
