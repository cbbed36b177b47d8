// The device side of the storage seam (docs/gpu.md), internal to model/: the recurrent-state slots of a
// StateStorage held in device buffers by the Vulkan backend. The engine and the memory policy keep naming slots
// through StateStorage; this class decides where their bytes are. A forward reads and writes them in place, so
// a forward moves no state through the host: only a checkpoint (Snapshot: device -> host), a restore
// (Restore: host -> device) or a host read (SlotData, the const views) does.
#pragma once

#include <memory>
#include <vector>

#include "gpu/vk_context.h"
#include "model/state_storage.h"

namespace rw::model::vk {

class DeviceStates final : public StateDevice {
 public:
  // Buffers for every slot of `host` (per recurrent layer: conv windows [slot][C·(Kc-1)], states
  // [slot][Hv·S·S]); slots whose host bytes are not all zero are uploaded once. A clear error when the device
  // cannot hold them.
  static Expected<std::shared_ptr<DeviceStates>> Create(std::shared_ptr<gpu::Context> ctx, const StateStorage& host);

  Status Read(int32_t slot, float* out) override;
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
};

}  // namespace rw::model::vk
