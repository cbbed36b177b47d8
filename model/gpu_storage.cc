// The device side of the storage seam: model/gpu_storage.h.
#include "model/gpu_storage.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace rw::model::vk {

// A device buffer for a storage's bytes; the error says what did not fit where.
static Expected<gpu::Buffer> AllocFor(gpu::Context& c, size_t bytes, const std::string& what, bool host_visible = false) {
  auto b = c.Alloc(std::max<size_t>(bytes, 16), host_visible);
  if (!b.ok()) return Error{b.error().kind, what + " does not fit on " + c.info().name + ": " + b.error().message};
  return b;
}

Expected<std::shared_ptr<DeviceStates>> DeviceStates::Create(std::shared_ptr<gpu::Context> ctx,
                                                             const StateStorage& host) {
  const StateShape& sh = host.shape();
  std::shared_ptr<DeviceStates> d(new DeviceStates(std::move(ctx), sh, host.n_slots()));
  gpu::Context& c = *d->ctx_;
  const size_t n = static_cast<size_t>(host.n_slots());
  const std::string what = "the recurrent states of " + std::to_string(n) + " slots (" +
                           std::to_string(sh.bytes_per_state() * n) + " bytes)";
  auto alloc = [&](size_t bytes, bool host_visible = false) { return AllocFor(c, bytes, what, host_visible); };
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
  for (int32_t s = 0; host.host_written() && s < host.n_slots(); ++s) {  // what the host held before, if any
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

namespace {

class StagedRead final : public PendingRead {
 public:
  StagedRead(std::shared_ptr<gpu::Context> ctx, std::shared_ptr<DeviceStates::StagingSpares> spares,
             gpu::Buffer staging, size_t bytes)
      : ctx_(std::move(ctx)), spares_(std::move(spares)), staging_(std::move(staging)), bytes_(bytes) {}
  ~StagedRead() override {
    (void)ctx_->Submit();  // the recorded copy lands before its buffer is reused or freed
    if (spares_->size() < DeviceStates::kMaxStagingSpares) spares_->push_back(std::move(staging_));
  }
  Status Finish(float* out) override {
    REWIND_RETURN_IF_ERROR(ctx_->Submit());  // a no-op when a forward has submitted (and waited for) it since
    std::memcpy(out, staging_.mapped(), bytes_);
    return Status::Ok();
  }

 private:
  std::shared_ptr<gpu::Context> ctx_;  // first: destroyed after the buffers
  std::shared_ptr<DeviceStates::StagingSpares> spares_;
  gpu::Buffer staging_;
  size_t bytes_ = 0;
};

}  // namespace

Expected<std::unique_ptr<PendingRead>> DeviceStates::ReadLater(int32_t slot) {
  gpu::Context& c = *ctx_;
  if (!staging_.valid() && !stage_always_) return std::unique_ptr<PendingRead>();  // unified memory: Read
  const size_t cb = conv_bytes(), db = delta_bytes(), lb = cb + db;
  gpu::Buffer staging;
  if (!spares_->empty()) {  // a landed checkpoint's staging buffer (fresh mapped memory costs its page faults)
    staging = std::move(spares_->back());
    spares_->pop_back();
  } else {
    REWIND_ASSIGN_OR_RETURN(staging, c.Alloc(lb * conv_.size(), /*host_visible=*/true));
  }
  for (size_t l = 0; l < conv_.size(); ++l) {  // recorded: after what came before, before the next forward
    c.Copy(conv_[l], cb * slot, staging, l * lb, cb);
    c.Copy(delta_[l], db * slot, staging, l * lb + cb, db);
  }
  to_host_ += lb * conv_.size();
  return std::unique_ptr<PendingRead>(std::make_unique<StagedRead>(ctx_, spares_, std::move(staging), lb * conv_.size()));
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

Expected<std::shared_ptr<DeviceKv>> DeviceKv::Create(std::shared_ptr<gpu::Context> ctx, const KvStorage& host) {
  std::shared_ptr<DeviceKv> d(new DeviceKv(std::move(ctx), host));
  gpu::Context& c = *d->ctx_;
  const uint64_t n = static_cast<uint64_t>(host.n_pages());
  const std::string what =
      "the KV cache of " + std::to_string(n) + " pages (" + std::to_string(host.total_bytes()) + " bytes)";
  auto alloc = [&](size_t bytes, bool host_visible = false) { return AllocFor(c, bytes, what, host_visible); };
  for (int32_t l = 0; l < d->n_layers_; ++l) {
    REWIND_ASSIGN_OR_RETURN(gpu::Buffer kb, alloc(d->k_page_ * n));
    REWIND_ASSIGN_OR_RETURN(gpu::Buffer vb, alloc(d->v_page_ * n));
    REWIND_RETURN_IF_ERROR(c.Fill(kb, 0));
    REWIND_RETURN_IF_ERROR(c.Fill(vb, 0));
    d->k_.push_back(std::move(kb));
    d->v_.push_back(std::move(vb));
  }
  if (d->n_layers_ > 0 && (d->k_[0].mapped() == nullptr || d->v_[0].mapped() == nullptr)) {
    REWIND_ASSIGN_OR_RETURN(d->staging_, alloc(std::max(d->k_page_, d->v_page_), /*host_visible=*/true));
  }
  REWIND_RETURN_IF_ERROR(c.Submit());
  auto zero = [](const uint8_t* p, size_t b) { return std::all_of(p, p + b, [](uint8_t x) { return x == 0; }); };
  for (int32_t l = 0; host.host_written() && l < d->n_layers_; ++l)  // what the host held before, if any
    for (int32_t p = 0; p < host.n_pages(); ++p) {
      const uint8_t* kp = host.K(l, p);
      const uint8_t* vp = host.V(l, p);
      if (!zero(kp, d->k_page_) || !zero(vp, d->v_page_))
        REWIND_RETURN_IF_ERROR(d->WriteRows(l, p, 0, host.page_size(), kp, vp));
    }
  return d;
}

uint64_t DeviceKv::device_bytes() const {
  uint64_t b = 0;
  for (size_t l = 0; l < k_.size(); ++l) b += k_[l].size() + v_[l].size();
  return b;
}

Status DeviceKv::ReadPage(int32_t layer, int32_t page, bool v, uint8_t* out) {
  gpu::Context& c = *ctx_;
  const gpu::Buffer& src = v ? v_[layer] : k_[layer];
  const size_t bytes = v ? v_page_ : k_page_;
  REWIND_RETURN_IF_ERROR(c.Submit());  // the forwards and copies recorded before land first
  if (!staging_.valid()) {
    std::memcpy(out, static_cast<const uint8_t*>(src.mapped()) + bytes * page, bytes);
  } else {
    c.Copy(src, bytes * page, staging_, 0, bytes);
    REWIND_RETURN_IF_ERROR(c.Submit());
    std::memcpy(out, staging_.mapped(), bytes);
  }
  to_host_ += bytes;
  return Status::Ok();
}

Status DeviceKv::Put(gpu::Buffer& dst, size_t offset, const uint8_t* src, size_t bytes) {
  gpu::Context& c = *ctx_;
  if (!staging_.valid()) {
    std::memcpy(static_cast<uint8_t*>(dst.mapped()) + offset, src, bytes);
  } else {
    std::memcpy(staging_.mapped(), src, bytes);
    c.Copy(staging_, 0, dst, offset, bytes);
    REWIND_RETURN_IF_ERROR(c.Submit());  // the staging buffer is reused by the next transfer
  }
  to_device_ += bytes;
  return Status::Ok();
}

Status DeviceKv::WriteRows(int32_t layer, int32_t page, int32_t row0, int32_t n, const uint8_t* k,
                           const uint8_t* v) {
  REWIND_RETURN_IF_ERROR(ctx_->Submit());  // earlier recorded work may still read or write these rows
  REWIND_RETURN_IF_ERROR(Put(k_[layer], k_page_ * page + k_row_ * row0, k, k_row_ * n));
  return Put(v_[layer], v_page_ * page + v_row_ * row0, v, v_row_ * n);
}

Status DeviceKv::CopyPage(int32_t src, int32_t dst, int32_t n_rows) {
  if (src == dst || n_rows == 0) return Status::Ok();
  for (int32_t l = 0; l < n_layers_; ++l) {  // recorded: ordered before the next forward's dispatches
    ctx_->Copy(k_[l], k_page_ * src, k_[l], k_page_ * dst, k_row_ * n_rows);
    ctx_->Copy(v_[l], v_page_ * src, v_[l], v_page_ * dst, v_row_ * n_rows);
  }
  return Status::Ok();
}

Expected<std::vector<gpu::Buffer>> ReplayPool::Take(size_t n_layers, size_t bytes) {
  bytes = std::max<size_t>(16, bytes);
  largest_ = std::max(largest_, n_layers * bytes);
  auto best = spare_.end();
  for (auto it = spare_.begin(); it != spare_.end(); ++it) {
    const size_t have = (*it)[0].size();
    if (it->size() == n_layers && have >= bytes && have / 4 <= bytes && (best == spare_.end() || have < (*best)[0].size()))
      best = it;
  }
  if (best != spare_.end()) {
    std::vector<gpu::Buffer> set = std::move(*best);
    spare_.erase(best);
    return set;
  }
  std::vector<gpu::Buffer> set(n_layers);
  for (gpu::Buffer& b : set) {
    REWIND_ASSIGN_OR_RETURN(b, ctx_->Alloc(bytes));
  }
  return set;
}

void ReplayPool::Give(std::vector<gpu::Buffer>&& set) {
  if (set.empty() || !set[0].valid()) return;
  (void)ctx_->Submit();  // recorded work that reads or writes them lands before they are reused or freed
  spare_.push_back(std::move(set));
  // Over the bounds (kMaxSpare sets, the bytes of the largest log taken), the smallest sets go first.
  auto bytes = [&] {
    size_t t = 0;
    for (const auto& s : spare_) t += s.size() * s[0].size();
    return t;
  };
  while (spare_.size() > kMaxSpare || (spare_.size() > 1 && bytes() > largest_)) {
    auto smallest = std::min_element(spare_.begin(), spare_.end(), [](const auto& a, const auto& b) {
      return a[0].size() < b[0].size();
    });
    spare_.erase(smallest);
  }
}

}  // namespace rw::model::vk
