// Internal to the model-based drafters: a private, growable attention KV of one sequence. Pages are the
// identity map (position p lives in page p / page_size); growing doubles the page count and copies the old
// pages.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <numeric>
#include <span>
#include <vector>

#include "base/expected.h"
#include "model/kv_storage.h"

namespace rw::engine::internal {

class GrowableKv {
 public:
  // `shape.n_pages` is ignored: storage is allocated on the first Reserve.
  explicit GrowableKv(const model::KvStorageConfig& shape) : shape_(shape) {}

  // Makes positions [0, n_positions) addressable, keeping the rows already written.
  Status Reserve(int64_t n_positions) {
    const int64_t need = (n_positions + shape_.page_size - 1) / shape_.page_size;
    if (kv_ != nullptr && need <= kv_->n_pages()) return Status::Ok();
    if (need > (1 << 24))
      return Error::OutOfRange("drafter KV: " + std::to_string(n_positions) + " positions");
    model::KvStorageConfig c = shape_;
    c.n_pages =
        static_cast<int32_t>(std::max<int64_t>(need, kv_ == nullptr ? 4 : 2 * int64_t{kv_->n_pages()}));
    REWIND_ASSIGN_OR_RETURN(std::unique_ptr<model::KvStorage> grown, model::KvStorage::Create(c));
    if (kv_ != nullptr) {
      const model::KvStorage& old = *kv_;  // const views: they read device-resident pages (a GPU drafter)
      for (int32_t l = 0; l < c.n_layers; ++l)
        for (int32_t p = 0; p < old.n_pages(); ++p)
          REWIND_RETURN_IF_ERROR(grown->WriteRows(l, p, 0, old.page_size(), old.K(l, p), old.V(l, p)));
    }
    kv_ = std::move(grown);
    pages_.resize(kv_->n_pages());
    std::iota(pages_.begin(), pages_.end(), 0);
    return Status::Ok();
  }

  model::KvStorage& kv() { return *kv_; }
  std::span<const int32_t> pages() const { return pages_; }
  uint64_t bytes() const { return kv_ == nullptr ? 0 : kv_->total_bytes(); }

 private:
  model::KvStorageConfig shape_;
  std::unique_ptr<model::KvStorage> kv_;
  std::vector<int32_t> pages_;  // [n_pages] identity page table
};

// Index of the largest logit (the lowest index among ties): greedy drafting.
inline int32_t ArgMax(std::span<const float> logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

}  // namespace rw::engine::internal
