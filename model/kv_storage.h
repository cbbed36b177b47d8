// Attention KV storage in fixed-size pages. The memory system (memory/) owns the bookkeeping (which page belongs
// to which sequence, reference counts, copy-on-write); this class only holds the bytes.
// Layout: K and V each [attn_layer][page][row][Hkv·D], element F16 (default) or F32. K is stored after
// attn_k_norm and RoPE, V as projected. A sequence's page table maps position p to page_table[p / page_size],
// row p % page_size.
// Memory: K and V are reserved as anonymous mappings and committed by the OS on first write, so the resident
// size follows the pages actually used (allocation is lowest-id-first), not the pool size. Unwritten rows read
// as zero.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "base/expected.h"

namespace rw::model {

enum class KvType { kF16, kF32 };

struct KvStorageConfig {
  int32_t n_layers = 0;    // attention layers
  int32_t row_width = 0;   // Hkv·D
  int32_t page_size = 32;  // tokens per page
  int32_t n_pages = 0;
  KvType type = KvType::kF16;
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
  int32_t elem_bytes() const { return cfg_.type == KvType::kF16 ? 2 : 4; }
  // Bytes of one token in all layers (K + V); bytes of one page in all layers; total bytes.
  uint64_t bytes_per_token() const { return 2ull * cfg_.n_layers * cfg_.row_width * elem_bytes(); }
  uint64_t bytes_per_page() const { return bytes_per_token() * cfg_.page_size; }
  uint64_t total_bytes() const { return bytes_per_page() * cfg_.n_pages; }

  // [page_size][row_width] elements of one layer's page.
  uint8_t* K(int32_t layer, int32_t page) { return k_.get() + Offset(layer, page); }
  uint8_t* V(int32_t layer, int32_t page) { return v_.get() + Offset(layer, page); }
  const uint8_t* K(int32_t layer, int32_t page) const { return k_.get() + Offset(layer, page); }
  const uint8_t* V(int32_t layer, int32_t page) const { return v_.get() + Offset(layer, page); }

  // Copies rows [0, n_rows) of page src to page dst in every layer (copy-on-write of a partly shared page).
  void CopyPage(int32_t src, int32_t dst, int32_t n_rows);
  // Hands the memory of pages [first, first + n) back to the OS (they read as zero afterwards). Only whole OS
  // pages inside the range are released, so neighbouring pages are never touched. For free pages only.
  void Discard(int32_t first, int32_t n);

 private:
  explicit KvStorage(const KvStorageConfig& c);
  uint64_t PageBytes() const { return static_cast<uint64_t>(cfg_.page_size) * cfg_.row_width * elem_bytes(); }
  uint64_t Offset(int32_t layer, int32_t page) const {
    return (static_cast<uint64_t>(layer) * cfg_.n_pages + page) * PageBytes();
  }

  using Mapping = std::unique_ptr<uint8_t, KvUnmap>;
  static Mapping Reserve(size_t bytes);  // zero-filled, committed lazily; null on failure

  KvStorageConfig cfg_;
  Mapping k_;  // [layer][page][row][row_width]
  Mapping v_;  // [layer][page][row][row_width]
};

}  // namespace rw::model
