#include "model/state_storage.h"

#include <algorithm>
#include <cstring>
#include <mutex>

#include "base/check.h"

namespace rw::model {
namespace internal {

// Free checkpoint buffers of one storage (thread-safe: a checkpoint may be dropped on another thread). It keeps
// at most kKeep: in steady state a cache drops about one checkpoint per one it takes, and more would hold
// memory outside the cache budget.
class StateBufferPool {
 public:
  static constexpr size_t kKeep = 2;
  BigVector<float> Take() {
    std::lock_guard<std::mutex> lock(mu_);
    if (free_.empty()) return {};
    BigVector<float> v = std::move(free_.back());
    free_.pop_back();
    return v;
  }
  void Give(BigVector<float>&& v) {
    std::lock_guard<std::mutex> lock(mu_);
    if (free_.size() < kKeep) free_.push_back(std::move(v));
  }

 private:
  std::mutex mu_;
  std::vector<BigVector<float>> free_;
};

}  // namespace internal

StateCheckpoint::~StateCheckpoint() { GiveBack(); }

StateCheckpoint& StateCheckpoint::operator=(StateCheckpoint&& o) noexcept {
  if (this != &o) {
    GiveBack();
    data_ = std::move(o.data_);
    pool_ = std::move(o.pool_);
  }
  return *this;
}

void StateCheckpoint::GiveBack() {
  // use_count 1: nobody else holds it, and only the owner's thread can share it, so no new holder can appear.
  if (pool_ != nullptr && data_ != nullptr && data_.use_count() == 1 && !data_->empty())
    pool_->Give(std::move(*data_));
  data_.reset();
  pool_.reset();
}

Expected<std::unique_ptr<StateStorage>> StateStorage::Create(const StateShape& shape, int32_t n_slots) {
  if (n_slots < 0 || shape.n_layers < 0 || shape.channels < 0 || shape.conv_len < 0 || shape.n_heads < 0 ||
      shape.head_dim < 0 || shape.state_cols < 0)
    return Error::InvalidArgument("state storage: sizes must be non-negative");
  std::unique_ptr<StateStorage> s(new StateStorage(shape, n_slots));
  s->pool_ = std::make_shared<internal::StateBufferPool>();
  try {
    s->data_.assign(shape.slot_floats() * n_slots, 0.0f);
  } catch (const std::bad_alloc&) {
    return Error::Exhausted("state storage: cannot allocate " + std::to_string(shape.bytes_per_state() * n_slots) +
                            " bytes");
  }
  return s;
}

float* StateStorage::Layer(int32_t slot, int32_t layer) {
  REWIND_CHECK(slot >= 0 && slot < n_slots_ && layer >= 0 && layer < shape_.n_layers);
  return data_.data() + static_cast<uint64_t>(slot) * shape_.slot_floats() + layer * shape_.layer_floats();
}
const float* StateStorage::Layer(int32_t slot, int32_t layer) const {
  REWIND_CHECK(slot >= 0 && slot < n_slots_ && layer >= 0 && layer < shape_.n_layers);
  return data_.data() + static_cast<uint64_t>(slot) * shape_.slot_floats() + layer * shape_.layer_floats();
}

std::span<const float> StateStorage::SlotData(int32_t slot) const {
  REWIND_CHECK(slot >= 0 && slot < n_slots_);
  return {data_.data() + static_cast<uint64_t>(slot) * shape_.slot_floats(), shape_.slot_floats()};
}
std::span<float> StateStorage::MutableSlotData(int32_t slot) {
  REWIND_CHECK(slot >= 0 && slot < n_slots_);
  return {data_.data() + static_cast<uint64_t>(slot) * shape_.slot_floats(), shape_.slot_floats()};
}

void StateStorage::Clear(int32_t slot) {
  auto d = MutableSlotData(slot);
  std::fill(d.begin(), d.end(), 0.0f);
}

void StateStorage::CopySlot(int32_t src, int32_t dst) {
  if (src == dst) return;
  auto s = SlotData(src);
  auto d = MutableSlotData(dst);
  std::memcpy(d.data(), s.data(), s.size_bytes());
}

StateCheckpoint StateStorage::Snapshot(int32_t slot) const {
  auto s = SlotData(slot);
  StateCheckpoint c;
  c.pool_ = pool_;
  c.data_ = std::make_shared<BigVector<float>>(pool_->Take());
  c.data_->resize(s.size());  // uninitialised when it grows: the memcpy writes every float
  std::memcpy(c.data_->data(), s.data(), s.size_bytes());
  return c;
}

Status StateStorage::Restore(const StateCheckpoint& checkpoint, int32_t slot) {
  if (checkpoint.data().size() != shape_.slot_floats())
    return Error::InvalidArgument("state checkpoint has " + std::to_string(checkpoint.bytes()) +
                                  " bytes, a slot has " + std::to_string(shape_.bytes_per_state()));
  auto d = MutableSlotData(slot);
  std::memcpy(d.data(), checkpoint.data().data(), d.size_bytes());
  return Status::Ok();
}

}  // namespace rw::model
