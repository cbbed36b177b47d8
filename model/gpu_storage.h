// The device side of the storage seam (docs/gpu.md), internal to model/: the recurrent-state slots of a
// StateStorage and the KV pages of a KvStorage held in device buffers by the Vulkan backend. The engine and the memory policy keep naming slots
// through StateStorage; this class decides where their bytes are. A forward reads and writes them in place, so
// a forward moves no state through the host: only a checkpoint (Snapshot: device -> host), a restore
// (Restore: host -> device) or a host read (SlotData, the const views) does.
#pragma once

#include <memory>
#include <vector>

#include "gpu/vk_context.h"
#include "model/forward.h"
#include "model/kv_storage.h"
#include "model/state_storage.h"

namespace rw::model::vk {

class DeviceStates final : public StateDevice {
 public:
  // Buffers for every slot of `host` (per recurrent layer: conv windows [slot][C·(Kc-1)], states
  // [slot][Hv·S·S]); slots whose host bytes are not all zero are uploaded once. A clear error when the device
  // cannot hold them.
  static Expected<std::shared_ptr<DeviceStates>> Create(std::shared_ptr<gpu::Context> ctx, const StateStorage& host);
  ~DeviceStates() override { (void)ctx_->Submit(); }  // recorded copies into these buffers land before they go

  Status Read(int32_t slot, float* out) override;
  // Records the slot's copy into a host-visible staging buffer of its own and returns: the copy runs with the
  // next submission (the next forward's); Finish submits only if nothing has since. Null on unified memory (the
  // slots are mapped: Read's one memcpy is the whole copy, cheaper than a staged one and its submission) unless
  // StageReadsForTesting.
  Expected<std::unique_ptr<PendingRead>> ReadLater(int32_t slot) override;
  void StageReadsForTesting(bool on) { stage_always_ = on; }
  // Staging buffers of landed checkpoint copies, for the next ones (at most kMaxStagingSpares).
  using StagingSpares = std::vector<gpu::Buffer>;
  static constexpr size_t kMaxStagingSpares = 4;
  Status Write(int32_t slot, const float* in) override;
  Status Copy(int32_t src, int32_t dst) override;
  Status Clear(int32_t slot) override;
  uint64_t device_bytes() const override;

  const gpu::Context* context() const { return ctx_.get(); }
  gpu::Buffer& conv(int32_t layer) { return conv_[layer]; }
  gpu::Buffer& delta(int32_t layer) { return delta_[layer]; }

 private:
  DeviceStates(std::shared_ptr<gpu::Context> ctx, const StateShape& shape, int32_t n_slots)
      : ctx_(std::move(ctx)), shape_(shape), n_slots_(n_slots) {}
  size_t conv_bytes() const { return 4 * shape_.conv_floats(); }
  size_t delta_bytes() const { return 4 * shape_.delta_floats(); }

  std::shared_ptr<gpu::Context> ctx_;  // first: destroyed after the buffers
  StateShape shape_;
  int32_t n_slots_ = 0;
  std::vector<gpu::Buffer> conv_, delta_;  // per recurrent layer
  gpu::Buffer staging_;                    // one slot in the host layout, host-visible (when not mapped)
  std::shared_ptr<StagingSpares> spares_ = std::make_shared<StagingSpares>();  // ReadLater's, shared with them
  bool stage_always_ = false;
};

// KV pages: per attention layer a K and a V pool [page][row][row bytes] in the host's byte layout (f32 or f16
// rows). A forward stores its new rows into them on the device (kv_scatter) and attention reads them in place
// through the batch's page lists, so it moves no KV bytes through the host.
class DeviceKv final : public KvDevice {
 public:
  // A clear error when the device cannot hold the pools; pages whose host bytes are not all zero are uploaded.
  static Expected<std::shared_ptr<DeviceKv>> Create(std::shared_ptr<gpu::Context> ctx, const KvStorage& host);
  ~DeviceKv() override { (void)ctx_->Submit(); }

  Status ReadPage(int32_t layer, int32_t page, bool v, uint8_t* out) override;
  Status WriteRows(int32_t layer, int32_t page, int32_t row0, int32_t n, const uint8_t* k,
                   const uint8_t* v) override;
  Status CopyPage(int32_t src, int32_t dst, int32_t n_rows) override;
  uint64_t device_bytes() const override;

  const gpu::Context* context() const { return ctx_.get(); }
  gpu::Buffer& k(int32_t layer) { return k_[layer]; }
  gpu::Buffer& v(int32_t layer) { return v_[layer]; }

 private:
  DeviceKv(std::shared_ptr<gpu::Context> ctx, const KvStorage& host)
      : ctx_(std::move(ctx)), n_layers_(host.config().n_layers), n_pages_(host.n_pages()),
        k_page_(host.k_page_bytes()), v_page_(host.v_page_bytes()), k_row_(host.k_row_bytes()),
        v_row_(host.v_row_bytes()) {}
  Status Put(gpu::Buffer& dst, size_t offset, const uint8_t* src, size_t bytes);

  std::shared_ptr<gpu::Context> ctx_;  // first: destroyed after the buffers
  int32_t n_layers_ = 0, n_pages_ = 0;
  size_t k_page_ = 0, v_page_ = 0, k_row_ = 0, v_row_ = 0;
  std::vector<gpu::Buffer> k_, v_;  // per attention layer: [page][row][row bytes]
  gpu::Buffer staging_;             // one K or V page, host-visible (when the pools are not mapped)
};

// Replay logs on the device (docs/gpu.md): the Vulkan forward records each sequence's log rows into device
// buffers a DeviceReplayRows holds, one per GDN layer ([token][C | b | a]: the host layout's rows, split by
// layer so that each buffer stays within the device's storage buffer range as the forward's own per-layer
// scratch does), and ReplayState / a lazy rollback's prefix read them there: recording and rollback move no log
// bytes through the host. The buffers come from, and go back to, the backend's ReplayPool (a log is made every
// forward; fresh device allocations each time would cost more than the copies they replace).
class ReplayPool {
 public:
  explicit ReplayPool(std::shared_ptr<gpu::Context> ctx) : ctx_(std::move(ctx)) {}
  ~ReplayPool() { (void)ctx_->Submit(); }
  // n_layers buffers of at least `bytes` each: the smallest spare set that holds it and is at most four times
  // as large, else new ones.
  Expected<std::vector<gpu::Buffer>> Take(size_t n_layers, size_t bytes);
  // Keeps a set for the next Take (at most kMaxSpare sets and the bytes of the largest log taken, the largest
  // sets first: VulkanBackend::forward_bytes counts one such log); the rest are freed.
  void Give(std::vector<gpu::Buffer>&& set);
  // Replay-log bytes uploaded (a log handed in as host rows; nothing reads a log back to the host).
  uint64_t to_device = 0;

 private:
  static constexpr size_t kMaxSpare = 16;
  std::shared_ptr<gpu::Context> ctx_;  // first: destroyed after the buffers
  std::vector<std::vector<gpu::Buffer>> spare_;
  size_t largest_ = 0;  // bytes of the largest set taken
};

class DeviceReplayRows final : public ReplayDevice {
 public:
  DeviceReplayRows(std::shared_ptr<ReplayPool> pool, std::vector<gpu::Buffer> layers)
      : pool_(std::move(pool)), layers_(std::move(layers)) {}
  ~DeviceReplayRows() override { pool_->Give(std::move(layers_)); }
  uint64_t capacity_floats() const override { return layers_.size() * (layers_.empty() ? 0 : layers_[0].size()) / 4; }
  const ReplayPool* pool() const { return pool_.get(); }
  gpu::Buffer& layer(int32_t gi) { return layers_[gi]; }
  const gpu::Buffer& layer(int32_t gi) const { return layers_[gi]; }

 private:
  std::shared_ptr<ReplayPool> pool_;
  std::vector<gpu::Buffer> layers_;  // per GDN layer: [token][replay row floats]
};

}  // namespace rw::model::vk
