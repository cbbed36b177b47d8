// The device side of the storage seam: model/gpu_storage.h.
#include "model/gpu_storage.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace rw::model::vk {

Expected<std::shared_ptr<DeviceStates>> DeviceStates::Create(std::shared_ptr<gpu::Context> ctx,
                                                             const StateStorage& host) {
  const StateShape& sh = host.shape();
  std::shared_ptr<DeviceStates> d(new DeviceStates(std::move(ctx), sh, host.n_slots()));
  gpu::Context& c = *d->ctx_;
  const size_t n = static_cast<size_t>(host.n_slots());
  auto alloc = [&](size_t bytes, bool host_visible = false) -> Expected<gpu::Buffer> {
    auto b = c.Alloc(std::max<size_t>(bytes, 16), host_visible);
    if (!b.ok())
      return Error{b.error().kind, "the recurrent states of " + std::to_string(n) + " slots (" +
                                       std::to_string(sh.bytes_per_state() * n) + " bytes) do not fit on " +
                                       c.info().name + ": " + b.error().message};
    return b;
  };
  for (int32_t l = 0; l < sh.n_layers; ++l) {
    REWIND_ASSIGN_OR_RETURN(gpu::Buffer cb, alloc(d->conv_bytes() * n));
    REWIND_ASSIGN_OR_RETURN(gpu::Buffer db, alloc(d->delta_bytes() * n));
    REWIND_RETURN_IF_ERROR(c.Fill(cb, 0));
    REWIND_RETURN_IF_ERROR(c.Fill(db, 0));
    d->conv_.push_back(std::move(cb));
    d->delta_.push_back(std::move(db));
  }
  if (sh.n_layers > 0 && (d->conv_[0].mapped() == nullptr || d->delta_[0].mapped() == nullptr)) {
    REWIND_ASSIGN_OR_RETURN(d->staging_, alloc(sh.bytes_per_state(), /*host_visible=*/true));
  }
  REWIND_RETURN_IF_ERROR(c.Submit());
  for (int32_t s = 0; s < host.n_slots(); ++s) {  // what the host held before (usually nothing: zeros)
    const std::span<const float> f = host.SlotData(s);
    if (std::any_of(f.begin(), f.end(), [](float v) { return v != 0.0f; }))
      REWIND_RETURN_IF_ERROR(d->Write(s, f.data()));
  }
  return d;
}

uint64_t DeviceStates::device_bytes() const {
  uint64_t b = 0;
  for (size_t l = 0; l < conv_.size(); ++l) b += conv_[l].size() + delta_[l].size();
  return b;
}

// Host layout of a slot: [layer][conv | delta]; device: conv_[layer][slot], delta_[layer][slot].
Status DeviceStates::Read(int32_t slot, float* out) {
  gpu::Context& c = *ctx_;
  const size_t cb = conv_bytes(), db = delta_bytes(), lb = cb + db;
  auto* dst = reinterpret_cast<uint8_t*>(out);
  REWIND_RETURN_IF_ERROR(c.Submit());  // what was recorded before (a forward, a copy) lands first
  if (!staging_.valid()) {  // unified memory: the buffers are mapped
    for (size_t l = 0; l < conv_.size(); ++l) {
      std::memcpy(dst + l * lb, static_cast<const uint8_t*>(conv_[l].mapped()) + cb * slot, cb);
      std::memcpy(dst + l * lb + cb, static_cast<const uint8_t*>(delta_[l].mapped()) + db * slot, db);
    }
  } else {
    for (size_t l = 0; l < conv_.size(); ++l) {
      c.Copy(conv_[l], cb * slot, staging_, l * lb, cb);
      c.Copy(delta_[l], db * slot, staging_, l * lb + cb, db);
    }
    REWIND_RETURN_IF_ERROR(c.Submit());
    std::memcpy(dst, staging_.mapped(), lb * conv_.size());
  }
  to_host_ += lb * conv_.size();
  return Status::Ok();
}

Status DeviceStates::Write(int32_t slot, const float* in) {
  gpu::Context& c = *ctx_;
  const size_t cb = conv_bytes(), db = delta_bytes(), lb = cb + db;
  const auto* src = reinterpret_cast<const uint8_t*>(in);
  REWIND_RETURN_IF_ERROR(c.Submit());  // earlier recorded work may still read or write this slot
  if (!staging_.valid()) {
    for (size_t l = 0; l < conv_.size(); ++l) {
      std::memcpy(static_cast<uint8_t*>(conv_[l].mapped()) + cb * slot, src + l * lb, cb);
      std::memcpy(static_cast<uint8_t*>(delta_[l].mapped()) + db * slot, src + l * lb + cb, db);
    }
  } else {
    std::memcpy(staging_.mapped(), src, lb * conv_.size());
    for (size_t l = 0; l < conv_.size(); ++l) {
      c.Copy(staging_, l * lb, conv_[l], cb * slot, cb);
      c.Copy(staging_, l * lb + cb, delta_[l], db * slot, db);
    }
    REWIND_RETURN_IF_ERROR(c.Submit());  // the staging buffer is reused by the next transfer
  }
  to_device_ += lb * conv_.size();
  return Status::Ok();
}

Status DeviceStates::Copy(int32_t src, int32_t dst) {
  if (src == dst) return Status::Ok();
  const size_t cb = conv_bytes(), db = delta_bytes();
  for (size_t l = 0; l < conv_.size(); ++l) {  // recorded: ordered before the next forward's dispatches
    if (cb > 0) ctx_->Copy(conv_[l], cb * src, conv_[l], cb * dst, cb);
    if (db > 0) ctx_->Copy(delta_[l], db * src, delta_[l], db * dst, db);
  }
  return Status::Ok();
}

Status DeviceStates::Clear(int32_t slot) {
  const size_t cb = conv_bytes(), db = delta_bytes();
  for (size_t l = 0; l < conv_.size(); ++l) {
    if (cb > 0) REWIND_RETURN_IF_ERROR(ctx_->Fill(conv_[l], 0, cb * slot, cb));
    if (db > 0) REWIND_RETURN_IF_ERROR(ctx_->Fill(delta_[l], 0, db * slot, db));
  }
  return Status::Ok();
}

}  // namespace rw::model::vk
