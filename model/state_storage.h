// Recurrent-state slots of the GDN / Mamba-2 layers, F32. The memory system decides which slot belongs to which
// sequence; this class holds the bytes and makes the named deep copies.
// Per slot, per recurrent layer: conv window [C][Kc-1] (llama.cpp layout, spec 9.2: [c·(Kc-1) + j], j = 0 oldest
// raw input) followed by the recurrent state: GDN [Hv][S][S] (llama.cpp layout: [h·S·S + j·S + i] = M_h[i][j],
// i = key index), Mamba-2 [H][P][N] (llama.cpp layout: [h·P·N + p·N + n]). A slot is one contiguous block:
// [layer][conv | state].
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <vector>

#include "base/big_buffer.h"
#include "base/expected.h"

namespace rw::model {

struct StateShape {
  int32_t n_layers = 0;   // GDN layers
  int32_t channels = 0;   // C = 2·Kd + Vd
  int32_t conv_len = 0;   // Kc - 1
  int32_t n_heads = 0;    // Hv / H
  int32_t head_dim = 0;   // S / P: rows of a head's state
  int32_t state_cols = 0; // columns of a head's state: 0 = head_dim (GDN's square state) / N (Mamba-2)

  int32_t cols() const { return state_cols > 0 ? state_cols : head_dim; }
  uint64_t conv_floats() const { return static_cast<uint64_t>(channels) * conv_len; }
  uint64_t delta_floats() const { return static_cast<uint64_t>(n_heads) * head_dim * cols(); }
  uint64_t layer_floats() const { return conv_floats() + delta_floats(); }
  uint64_t slot_floats() const { return layer_floats() * n_layers; }
  uint64_t bytes_per_state() const { return slot_floats() * sizeof(float); }
};

namespace internal {
class StateBufferPool;  // state_storage.cc
}  // namespace internal

// Where a storage's slots live when a forward backend keeps them on its device (docs/gpu.md; the Vulkan backend:
// model/gpu_storage.cc). The storage then routes every named copy through it, and the host array only stages
// what a caller reads: Clear, CopySlot and ReplayState stay on the device, Snapshot is a device -> host copy and
// Restore a host -> device copy. The memory policy (memory/) does not see the difference.
// A device -> host copy of a slot recorded on the device's queue and not waited for (StateDevice::ReadLater):
// it runs with the next submission (the next forward's, which the queue orders after it).
class PendingRead {
 public:
  virtual ~PendingRead() = default;
  // Waits for the copy if it has not run yet (submitting what is recorded) and writes the slot's floats to out.
  virtual Status Finish(float* out) = 0;
};

class StateDevice {
 public:
  virtual ~StateDevice() = default;
  virtual Status Read(int32_t slot, float* out) = 0;        // a slot's floats in the host layout, device -> host
  // Read without waiting: the copy is recorded and lands later (null: this device reads synchronously only).
  virtual Expected<std::unique_ptr<PendingRead>> ReadLater(int32_t) { return std::unique_ptr<PendingRead>(); }
  virtual Status Write(int32_t slot, const float* in) = 0;  // host -> device
  virtual Status Copy(int32_t src, int32_t dst) = 0;        // on the device
  virtual Status Clear(int32_t slot) = 0;                   // on the device
  // Bytes moved between the host and the device so far (tests, /metrics).
  uint64_t bytes_to_host() const { return to_host_; }
  uint64_t bytes_to_device() const { return to_device_; }
  // Bytes this storage holds on the device.
  virtual uint64_t device_bytes() const = 0;

 protected:
  uint64_t to_host_ = 0, to_device_ = 0;
};

// An immutable copy of one slot (all GDN layers), taken by StateStorage::Snapshot. Move-only. Its buffer goes
// back to the storage's pool when it is dropped (unless shared), so the next snapshot reuses it: fresh memory for
// a large state costs its page faults again. From a device slot the copy is asynchronous (docs/gpu.md): the
// bytes land when first needed (data(), Share(), a Restore: a wait for the copy's fence) or at the storage's
// next Snapshot (the copy has run with the forward in between: no wait).
class StateCheckpoint {
 public:
  StateCheckpoint() = default;
  ~StateCheckpoint();
  StateCheckpoint(StateCheckpoint&& o) noexcept = default;
  StateCheckpoint& operator=(StateCheckpoint&& o) noexcept;
  StateCheckpoint(const StateCheckpoint&) = delete;
  StateCheckpoint& operator=(const StateCheckpoint&) = delete;

  // For persistence: rebuild from saved floats (size must match the storage's slot size on Restore).
  static StateCheckpoint FromData(std::span<const float> data) {
    StateCheckpoint c;
    c.data_ = std::make_shared<BigVector<float>>();
    c.data_->resize(data.size());
    if (!data.empty()) std::memcpy(c.data_->data(), data.data(), data.size_bytes());
    return c;
  }
  std::span<const float> data() const {
    Land();
    return data_ ? std::span<const float>(*data_) : std::span<const float>();
  }
  uint64_t bytes() const { return data_ ? data_->size() * sizeof(float) : 0; }
  bool empty() const { return bytes() == 0; }
  // Whether the device -> host copy has not landed in the host bytes yet.
  bool pending() const { return pending_ != nullptr && pending_->read != nullptr; }
  // The bytes stay valid while the returned pointer lives, also after this checkpoint is dropped: the disk and
  // remote writers read a persisted state through it instead of a copy made on the engine thread. A buffer still
  // shared when the checkpoint is dropped is freed by its last holder instead of going back to the pool.
  std::shared_ptr<const void> Share() const {
    Land();
    return data_;
  }

  // A copy still to land: the storage that took it keeps a weak reference, to land it at its next Snapshot.
  struct Pending {
    std::unique_ptr<PendingRead> read;
    BigVector<float>* out = nullptr;  // the checkpoint's buffer (the checkpoint owns this record)
    void Land();
  };

 private:
  friend class StateStorage;
  void GiveBack();
  void Land() const {
    if (pending_ != nullptr) pending_->Land();
  }
  std::shared_ptr<Pending> pending_;  // null: the bytes are in data_
  std::shared_ptr<BigVector<float>> data_;  // [gdn_layer][conv | delta] (huge pages: base/big_buffer.h)
  std::shared_ptr<internal::StateBufferPool> pool_;  // null: not from a storage (FromData, moved from)
};

class StateStorage {
 public:
  static Expected<std::unique_ptr<StateStorage>> Create(const StateShape& shape, int32_t n_slots);
  ~StateStorage();
  StateStorage(const StateStorage&) = delete;
  StateStorage& operator=(const StateStorage&) = delete;

  const StateShape& shape() const { return shape_; }
  int32_t n_slots() const { return n_slots_; }
  uint64_t bytes_per_state() const { return shape_.bytes_per_state(); }

  // Host pointers. With a device (SetDevice) the const views read the slot from the device first (a copy); the
  // mutable ones are for the CPU forward and are refused: a device-resident slot changes through Restore.
  float* Conv(int32_t slot, int32_t layer) { return Layer(slot, layer); }                        // [C][Kc-1]
  float* Delta(int32_t slot, int32_t layer) { return Layer(slot, layer) + shape_.conv_floats(); } // [Hv][S][S] / [H][P][N]
  const float* Conv(int32_t slot, int32_t layer) const { return Layer(slot, layer); }
  const float* Delta(int32_t slot, int32_t layer) const { return Layer(slot, layer) + shape_.conv_floats(); }
  std::span<const float> SlotData(int32_t slot) const;
  std::span<float> MutableSlotData(int32_t slot);

  // The state of a new sequence: all zeros.
  void Clear(int32_t slot);
  // Deep copies.
  void CopySlot(int32_t src, int32_t dst);
  StateCheckpoint Snapshot(int32_t slot) const;
  // Keeps up to n free snapshot buffers ready, mapped and faulted in by a background thread of the lowest
  // priority (SCHED_IDLE), so Snapshot never waits for fresh memory while the cache grows. They are memory
  // outside the cache budget (n states). Without it, the two last dropped checkpoints' buffers are kept.
  void KeepSpares(size_t n);
  size_t spare_buffers() const;
  // Errors if the checkpoint's size does not match this storage's slot size.
  Status Restore(const StateCheckpoint& checkpoint, int32_t slot);

  // The device that holds the slots from now on (a backend's; its slots start as this storage's host bytes,
  // which the backend uploads once). Null: the host array (the CPU forward).
  void SetDevice(std::shared_ptr<StateDevice> device) { device_ = std::move(device); }
  StateDevice* device() const { return device_.get(); }
  // Whether any host slot byte was written (Clear, CopySlot, Restore or a mutable view on the host): a device
  // taking over a storage that was never written needs no upload.
  bool host_written() const { return host_written_; }

 private:
  StateStorage(const StateShape& s, int32_t n) : shape_(s), n_slots_(n) {}
  float* Layer(int32_t slot, int32_t layer);
  const float* Layer(int32_t slot, int32_t layer) const;

  StateShape shape_;
  int32_t n_slots_ = 0;
  // Reads a device-resident slot into data_ (the const views stage it there).
  void Stage(int32_t slot) const;

  mutable BigVector<float> data_;  // [slot][gdn_layer][conv | delta]
  std::shared_ptr<StateDevice> device_;
  bool host_written_ = false;
  std::shared_ptr<internal::StateBufferPool> pool_;  // buffers of dropped checkpoints, for the next Snapshot
  // Device snapshots not landed yet (their checkpoints may be gone): landed by the next Snapshot.
  mutable std::vector<std::weak_ptr<StateCheckpoint::Pending>> pending_;
};

}  // namespace rw::model
