#include "model/kv_storage.h"

#include <cstring>
#include <sys/mman.h>
#include <unistd.h>

#include "base/check.h"

namespace rw::model {

Status CheckKvTypes(KvTypes types, int32_t head_dim) {
  for (KvType t : {types.k, types.v}) {
    const int32_t block = kernels::KvBlockElems(t);
    if (head_dim <= 0 || head_dim % block != 0)
      return Error::InvalidArgument("KV cache type " + std::string(kernels::KvTypeName(t)) + " stores blocks of " +
                                    std::to_string(block) + " elements; this model's attention head dim " +
                                    std::to_string(head_dim) + " is not a multiple of it (use f16, bf16 or f32)");
  }
  return Status::Ok();
}

KvStorage::KvStorage(const KvStorageConfig& c)
    : cfg_(c), k_row_(kernels::KvRowBytes(c.type.k, c.row_width)), v_row_(kernels::KvRowBytes(c.type.v, c.row_width)) {}
KvStorage::~KvStorage() = default;

void KvUnmap::operator()(uint8_t* p) const {
  if (p != nullptr) munmap(p, bytes);
}

KvStorage::Mapping KvStorage::Reserve(size_t bytes) {
  // MAP_NORESERVE: no swap is set aside for the whole pool; the kernel commits (zeroed) pages on first touch.
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return Mapping(nullptr, KvUnmap{0});
  return Mapping(static_cast<uint8_t*>(p), KvUnmap{bytes});
}

Expected<std::unique_ptr<KvStorage>> KvStorage::Create(const KvStorageConfig& c) {
  if (c.n_layers < 0 || c.row_width < 0 || c.page_size <= 0 || c.n_pages < 0)
    return Error::InvalidArgument("KV storage: sizes must be non-negative and page_size > 0");
  if (c.row_width > 0) REWIND_RETURN_IF_ERROR(CheckKvTypes(c.type, c.head_dim > 0 ? c.head_dim : c.row_width));
  if (c.head_dim > 0 && c.row_width % c.head_dim != 0)
    return Error::InvalidArgument("KV storage: row width is not a multiple of the head dim");
  std::unique_ptr<KvStorage> s(new KvStorage(c));
  const uint64_t k_bytes = static_cast<uint64_t>(c.n_layers) * c.n_pages * s->k_page_bytes();
  const uint64_t v_bytes = static_cast<uint64_t>(c.n_layers) * c.n_pages * s->v_page_bytes();
  s->k_ = Reserve(k_bytes > 0 ? k_bytes : 1);
  s->v_ = Reserve(v_bytes > 0 ? v_bytes : 1);
  if (!s->k_ || !s->v_)
    return Error::Exhausted("KV storage: cannot reserve " + std::to_string(k_bytes + v_bytes) + " bytes");
  return s;
}

uint8_t* KvStorage::Mutable(int32_t layer, int32_t page, bool v) {
  REWIND_CHECK_MSG(device_ == nullptr, "a device-resident KV page has no mutable host view (use WriteRows)");
  host_written_ = true;
  return v ? v_.get() + Offset(layer, page, v_page_bytes()) : k_.get() + Offset(layer, page, k_page_bytes());
}

const uint8_t* KvStorage::Staged(int32_t layer, int32_t page, bool v) const {
  uint8_t* p = v ? v_.get() + Offset(layer, page, v_page_bytes()) : k_.get() + Offset(layer, page, k_page_bytes());
  if (device_ != nullptr) {
    REWIND_CHECK(layer >= 0 && layer < cfg_.n_layers && page >= 0 && page < cfg_.n_pages);
    const Status s = device_->ReadPage(layer, page, v, p);
    REWIND_CHECK_MSG(s.ok(), "reading KV page %d from the device: %s", page, s.error().message.c_str());
  }
  return p;
}

Status KvStorage::WriteRows(int32_t layer, int32_t page, int32_t row0, int32_t n, const uint8_t* k,
                            const uint8_t* v) {
  if (layer < 0 || layer >= cfg_.n_layers || page < 0 || page >= cfg_.n_pages || row0 < 0 || n < 0 ||
      row0 + n > cfg_.page_size)
    return Error::OutOfRange("KV rows out of range");
  if (n == 0) return Status::Ok();
  if (device_ != nullptr) return device_->WriteRows(layer, page, row0, n, k, v);
  std::memcpy(K(layer, page) + row0 * k_row_, k, n * k_row_);
  std::memcpy(V(layer, page) + row0 * v_row_, v, n * v_row_);
  return Status::Ok();
}

void KvStorage::CopyPage(int32_t src, int32_t dst, int32_t n_rows) {
  REWIND_CHECK(src >= 0 && src < cfg_.n_pages && dst >= 0 && dst < cfg_.n_pages);
  REWIND_CHECK(n_rows >= 0 && n_rows <= cfg_.page_size);
  if (src == dst) return;
  if (device_ != nullptr) {
    const Status s = device_->CopyPage(src, dst, n_rows);
    REWIND_CHECK_MSG(s.ok(), "device KV page copy: %s", s.error().message.c_str());
    return;
  }
  for (int32_t l = 0; l < cfg_.n_layers; ++l) {
    std::memcpy(K(l, dst), K(l, src), n_rows * k_row_);
    std::memcpy(V(l, dst), V(l, src), n_rows * v_row_);
  }
}

void KvStorage::Discard(int32_t first, int32_t n) {
  REWIND_CHECK(first >= 0 && n >= 0 && first + n <= cfg_.n_pages);
  if (n == 0 || k_row_ + v_row_ == 0) return;  // (device pages: their bytes stay until rewritten)
  static const uintptr_t os_page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  auto release = [&](uint8_t* begin, uint8_t* end) {
    const uintptr_t b = (reinterpret_cast<uintptr_t>(begin) + os_page - 1) / os_page * os_page;
    const uintptr_t e = reinterpret_cast<uintptr_t>(end) / os_page * os_page;
    if (b < e) madvise(reinterpret_cast<void*>(b), e - b, MADV_DONTNEED);
  };
  for (int32_t l = 0; l < cfg_.n_layers; ++l) {
    uint8_t* k = k_.get() + Offset(l, first, k_page_bytes());
    uint8_t* v = v_.get() + Offset(l, first, v_page_bytes());
    release(k, k + static_cast<uint64_t>(n) * k_page_bytes());
    release(v, v + static_cast<uint64_t>(n) * v_page_bytes());
  }
}

}  // namespace rw::model
