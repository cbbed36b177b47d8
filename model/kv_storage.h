// Attention KV storage in fixed-size pages. The memory system (memory/) owns the bookkeeping (which page belongs
// to which sequence, reference counts, copy-on-write); this class only holds the bytes.
// Layout: K and V each [attn_layer][page][row][row bytes]; a row is Hkv·D elements of the cache type
// (kernels/kv_quant.h: F16 by default, F32, BF16 or a 32-element block format; K and V may differ), so a row is
// KvRowBytes(type, Hkv·D) bytes. K is stored after attn_k_norm and RoPE, V as projected. A sequence's page table maps position p to page_table[p / page_size],
// row p % page_size.
// Memory: K and V are reserved as anonymous mappings and committed by the OS on first write, so the resident
// size follows the pages actually used (allocation is lowest-id-first), not the pool size. Unwritten rows read
// as zero.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "base/expected.h"
#include "kernels/kv_quant.h"

namespace rw::model {

using kernels::KvType;
using kernels::KvTypes;

// Input check of a cache type for a model: the quantised types store 32-element blocks, so every head (D
// elements) must be whole blocks. The error names the type, the head dim and the types that fit.
Status CheckKvTypes(KvTypes types, int32_t head_dim);

struct KvStorageConfig {
  int32_t n_layers = 0;    // attention layers
  int32_t row_width = 0;   // Hkv·D
  int32_t page_size = 32;  // tokens per page
  int32_t n_pages = 0;
  KvTypes type = KvType::kF16;  // K and V element types
  int32_t head_dim = 0;    // D, for the block check (0: row_width)
};

// Where a storage's pages live when a forward backend keeps them on its device (docs/gpu.md; the Vulkan backend:
// model/gpu_storage.cc), in the host's byte layout. The storage then routes the named copies through it and its
// host mapping only stages what a caller reads or writes: CopyPage stays on the device, a const K / V view is a
// device -> host copy of that page, WriteRows a host -> device copy. The memory policy does not see the difference.
class KvDevice {
 public:
  virtual ~KvDevice() = default;
  // One layer's K (v false) or V (v true) page, device -> host.
  virtual Status ReadPage(int32_t layer, int32_t page, bool v, uint8_t* out) = 0;
  // Rows [row0, row0 + n) of one layer's page: their K and V bytes (contiguous rows), host -> device.
  virtual Status WriteRows(int32_t layer, int32_t page, int32_t row0, int32_t n, const uint8_t* k,
                           const uint8_t* v) = 0;
  virtual Status CopyPage(int32_t src, int32_t dst, int32_t n_rows) = 0;  // every layer, on the device
  uint64_t bytes_to_host() const { return to_host_; }
  uint64_t bytes_to_device() const { return to_device_; }
  virtual uint64_t device_bytes() const = 0;

 protected:
  uint64_t to_host_ = 0, to_device_ = 0;
};

// Deleter of the anonymous mappings holding K and V.
struct KvUnmap {
  size_t bytes = 0;
  void operator()(uint8_t* p) const;
};

class KvStorage {
 public:
  static Expected<std::unique_ptr<KvStorage>> Create(const KvStorageConfig& config);
  KvStorage(const KvStorage&) = delete;
  KvStorage& operator=(const KvStorage&) = delete;
  ~KvStorage();

  const KvStorageConfig& config() const { return cfg_; }
  int32_t page_size() const { return cfg_.page_size; }
  int32_t n_pages() const { return cfg_.n_pages; }
  // Bytes of one K / V row (one token of one layer).
  size_t k_row_bytes() const { return k_row_; }
  size_t v_row_bytes() const { return v_row_; }
  // Bytes of one layer's K / V page.
  uint64_t k_page_bytes() const { return static_cast<uint64_t>(cfg_.page_size) * k_row_; }
  uint64_t v_page_bytes() const { return static_cast<uint64_t>(cfg_.page_size) * v_row_; }
  // Bytes of one token in all layers (K + V); bytes of one page in all layers; total bytes.
  uint64_t bytes_per_token() const { return static_cast<uint64_t>(cfg_.n_layers) * (k_row_ + v_row_); }
  uint64_t bytes_per_page() const { return bytes_per_token() * cfg_.page_size; }
  uint64_t total_bytes() const { return bytes_per_page() * cfg_.n_pages; }

  // [page_size][row bytes] of one layer's page. With a device (SetDevice) the const views read the page from the
  // device first (a copy into the host mapping, valid until the page changes); the mutable ones are for the CPU
  // forward and are refused: a device-resident page changes through WriteRows.
  uint8_t* K(int32_t layer, int32_t page) { return Mutable(layer, page, false); }
  uint8_t* V(int32_t layer, int32_t page) { return Mutable(layer, page, true); }
  const uint8_t* K(int32_t layer, int32_t page) const { return Staged(layer, page, false); }
  const uint8_t* V(int32_t layer, int32_t page) const { return Staged(layer, page, true); }
  // Writes rows [row0, row0 + n) of a layer's page (n rows of k_row_bytes / v_row_bytes each), wherever the page
  // lives.
  Status WriteRows(int32_t layer, int32_t page, int32_t row0, int32_t n, const uint8_t* k, const uint8_t* v);

  // The device that holds the pages from now on (a backend's; it starts from this storage's host bytes).
  void SetDevice(std::shared_ptr<KvDevice> device) { device_ = std::move(device); }
  KvDevice* device() const { return device_.get(); }
  // Whether any host byte was written (a mutable view taken, WriteRows on the host): a device taking over a
  // storage that was never written needs no upload.
  bool host_written() const { return host_written_; }

  // Copies rows [0, n_rows) of page src to page dst in every layer (copy-on-write of a partly shared page).
  void CopyPage(int32_t src, int32_t dst, int32_t n_rows);
  // Hands the memory of pages [first, first + n) back to the OS (they read as zero afterwards). Only whole OS
  // pages inside the range are released, so neighbouring pages are never touched. For free pages only.
  void Discard(int32_t first, int32_t n);

 private:
  explicit KvStorage(const KvStorageConfig& c);
  uint64_t Offset(int32_t layer, int32_t page, uint64_t page_bytes) const {
    return (static_cast<uint64_t>(layer) * cfg_.n_pages + page) * page_bytes;
  }

  uint8_t* Mutable(int32_t layer, int32_t page, bool v);
  const uint8_t* Staged(int32_t layer, int32_t page, bool v) const;

  using Mapping = std::unique_ptr<uint8_t, KvUnmap>;
  static Mapping Reserve(size_t bytes);  // zero-filled, committed lazily; null on failure

  KvStorageConfig cfg_;
  size_t k_row_ = 0, v_row_ = 0;  // KvRowBytes(type, row_width)
  Mapping k_;  // [layer][page][row][k_row_ bytes]
  Mapping v_;  // [layer][page][row][v_row_ bytes]
  std::shared_ptr<KvDevice> device_;
  bool host_written_ = false;
};

}  // namespace rw::model
