#include "model/state_storage.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "base/check.h"

namespace rw::model {
namespace internal {

// Free checkpoint buffers of one storage (thread-safe: a checkpoint may be dropped on another thread). It keeps
// at most `keep`: in steady state a cache drops about one checkpoint per one it takes, and more would hold memory
// outside the cache budget. With a filler (StateStorage::KeepSpares), a background thread of the lowest priority
// maps and touches new buffers until `keep` are ready, so a snapshot taken while the cache grows copies into
// memory that has already faulted in rather than paying the first touch on the engine thread (on the 2-core
// virtual machine about 100 ms per 19 MiB state for memory the process never had: docs/performance.md).
class StateBufferPool {
 public:
  explicit StateBufferPool(size_t floats) : floats_(floats) {}
  ~StateBufferPool() { StopFiller(); }

  BigVector<float> Take() {
    std::lock_guard<std::mutex> lock(mu_);
    if (free_.empty()) return {};
    BigVector<float> v = std::move(free_.back());
    free_.pop_back();
    cv_.notify_all();
    return v;
  }
  void Give(BigVector<float>&& v) {
    std::lock_guard<std::mutex> lock(mu_);
    if (free_.size() < keep_) free_.push_back(std::move(v));
  }
  size_t spares() {
    std::lock_guard<std::mutex> lock(mu_);
    return free_.size();
  }

  void StartFiller(size_t keep) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      keep_ = std::max(keep_, keep);
      if (filler_.joinable() || floats_ == 0) return;
    }
    filler_ = std::thread([this] { FillLoop(); });
  }
  void StopFiller() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (filler_.joinable()) filler_.join();
  }

 private:
  void FillLoop() {
    sched_param idle{};
    // Best effort: where SCHED_IDLE is refused the filler still works, at normal priority.
    (void)pthread_setschedparam(pthread_self(), SCHED_IDLE, &idle);
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return stop_ || free_.size() < keep_; });
      if (stop_) return;
      lock.unlock();
      BigVector<float> v;
      v.resize(floats_);  // mapped, not initialised: the writes below fault every page in
      for (size_t i = 0; i < floats_; i += 1024) v[i] = 0.0f;
      lock.lock();
      if (free_.size() < keep_) free_.push_back(std::move(v));
    }
  }

  const size_t floats_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<BigVector<float>> free_;
  size_t keep_ = 2;
  bool stop_ = false;
  std::thread filler_;
};

}  // namespace internal

StateCheckpoint::~StateCheckpoint() { GiveBack(); }

StateCheckpoint& StateCheckpoint::operator=(StateCheckpoint&& o) noexcept {
  if (this != &o) {
    GiveBack();
    data_ = std::move(o.data_);
    pool_ = std::move(o.pool_);
    pending_ = std::move(o.pending_);
  }
  return *this;
}

void StateCheckpoint::Pending::Land() {
  if (read == nullptr) return;
  const Status s = read->Finish(out->data());
  REWIND_CHECK_MSG(s.ok(), "state device: checkpoint copy failed: %s", s.ok() ? "" : s.error().message.c_str());
  read.reset();
}

void StateCheckpoint::GiveBack() {
  pending_.reset();  // a copy that never landed: its staging goes (after the recorded work, PendingRead's job)
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
  s->pool_ = std::make_shared<internal::StateBufferPool>(shape.slot_floats());
  try {
    s->data_.assign(shape.slot_floats() * n_slots, 0.0f);
  } catch (const std::bad_alloc&) {
    return Error::Exhausted("state storage: cannot allocate " + std::to_string(shape.bytes_per_state() * n_slots) +
                            " bytes");
  }
  return s;
}

void StateStorage::Stage(int32_t slot) const {
  if (device_ == nullptr) return;
  const Status s = device_->Read(slot, data_.data() + static_cast<uint64_t>(slot) * shape_.slot_floats());
  REWIND_CHECK_MSG(s.ok(), "reading state slot %d from the device: %s", slot, s.error().message.c_str());
}

float* StateStorage::Layer(int32_t slot, int32_t layer) {
  REWIND_CHECK_MSG(device_ == nullptr, "a device-resident state slot has no mutable host view (use Restore)");
  host_written_ = true;
  REWIND_CHECK(slot >= 0 && slot < n_slots_ && layer >= 0 && layer < shape_.n_layers);
  return data_.data() + static_cast<uint64_t>(slot) * shape_.slot_floats() + layer * shape_.layer_floats();
}
const float* StateStorage::Layer(int32_t slot, int32_t layer) const {
  REWIND_CHECK(slot >= 0 && slot < n_slots_ && layer >= 0 && layer < shape_.n_layers);
  Stage(slot);
  return data_.data() + static_cast<uint64_t>(slot) * shape_.slot_floats() + layer * shape_.layer_floats();
}

std::span<const float> StateStorage::SlotData(int32_t slot) const {
  REWIND_CHECK(slot >= 0 && slot < n_slots_);
  Stage(slot);
  return {data_.data() + static_cast<uint64_t>(slot) * shape_.slot_floats(), shape_.slot_floats()};
}
std::span<float> StateStorage::MutableSlotData(int32_t slot) {
  REWIND_CHECK_MSG(device_ == nullptr, "a device-resident state slot has no mutable host view (use Restore)");
  host_written_ = true;
  REWIND_CHECK(slot >= 0 && slot < n_slots_);
  return {data_.data() + static_cast<uint64_t>(slot) * shape_.slot_floats(), shape_.slot_floats()};
}

// A failed device copy here means a lost device: nothing the engine could recover from.
static void CheckDevice(const Status& s, const char* what) {
  REWIND_CHECK_MSG(s.ok(), "device state %s: %s", what, s.error().message.c_str());
}

void StateStorage::Clear(int32_t slot) {
  if (device_ != nullptr) return CheckDevice(device_->Clear(slot), "clear");
  auto d = MutableSlotData(slot);
  std::fill(d.begin(), d.end(), 0.0f);
}

void StateStorage::CopySlot(int32_t src, int32_t dst) {
  if (src == dst) return;
  if (device_ != nullptr) return CheckDevice(device_->Copy(src, dst), "copy");
  auto s = SlotData(src);
  auto d = MutableSlotData(dst);
  std::memcpy(d.data(), s.data(), s.size_bytes());
}

StateStorage::~StateStorage() {
  if (pool_ != nullptr) pool_->StopFiller();  // the pool itself may outlive the storage (checkpoints hold it)
}

void StateStorage::KeepSpares(size_t n) { pool_->StartFiller(n); }

size_t StateStorage::spare_buffers() const { return pool_->spares(); }

StateCheckpoint StateStorage::Snapshot(int32_t slot) const {
  REWIND_CHECK(slot >= 0 && slot < n_slots_);
  StateCheckpoint c;
  c.pool_ = pool_;
  c.data_ = std::make_shared<BigVector<float>>(pool_->Take());
  c.data_->resize(shape_.slot_floats());  // uninitialised when it grows: the copy writes every float
  if (device_ != nullptr) {
    // Earlier snapshots' copies have run with the forwards since: their bytes land now, without a wait.
    for (const auto& w : pending_)
      if (auto p = w.lock()) p->Land();
    pending_.clear();
    // Recorded on the device's queue, not waited for: the next forward runs after it.
    auto later = device_->ReadLater(slot);
    CheckDevice(later.ok() ? Status::Ok() : Status(later.error()), "snapshot");
    if (*later != nullptr) {
      c.pending_ = std::make_shared<StateCheckpoint::Pending>();
      c.pending_->read = std::move(*later);
      c.pending_->out = c.data_.get();
      pending_.push_back(c.pending_);
      return c;
    }
    CheckDevice(device_->Read(slot, c.data_->data()), "snapshot");  // straight into the checkpoint's buffer
    return c;
  }
  auto s = SlotData(slot);
  std::memcpy(c.data_->data(), s.data(), s.size_bytes());
  return c;
}

Status StateStorage::Restore(const StateCheckpoint& checkpoint, int32_t slot) {
  if (checkpoint.data().size() != shape_.slot_floats())
    return Error::InvalidArgument("state checkpoint has " + std::to_string(checkpoint.bytes()) +
                                  " bytes, a slot has " + std::to_string(shape_.bytes_per_state()));
  if (device_ != nullptr) {
    REWIND_CHECK(slot >= 0 && slot < n_slots_);
    return device_->Write(slot, checkpoint.data().data());
  }
  auto d = MutableSlotData(slot);
  std::memcpy(d.data(), checkpoint.data().data(), d.size_bytes());
  return Status::Ok();
}

}  // namespace rw::model
