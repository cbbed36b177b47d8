#include "model/kv_storage.h"

#include <cstring>
#include <sys/mman.h>
#include <unistd.h>

#include "base/check.h"

namespace rw::model {

KvStorage::KvStorage(const KvStorageConfig& c) : cfg_(c) {}
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
  std::unique_ptr<KvStorage> s(new KvStorage(c));
  const uint64_t bytes = static_cast<uint64_t>(c.n_layers) * c.n_pages * s->PageBytes();
  s->k_ = Reserve(bytes > 0 ? bytes : 1);
  s->v_ = Reserve(bytes > 0 ? bytes : 1);
  if (!s->k_ || !s->v_) return Error::Exhausted("KV storage: cannot reserve " + std::to_string(2 * bytes) + " bytes");
  return s;
}

void KvStorage::CopyPage(int32_t src, int32_t dst, int32_t n_rows) {
  REWIND_CHECK(src >= 0 && src < cfg_.n_pages && dst >= 0 && dst < cfg_.n_pages);
  REWIND_CHECK(n_rows >= 0 && n_rows <= cfg_.page_size);
  if (src == dst) return;
  const uint64_t n = static_cast<uint64_t>(n_rows) * cfg_.row_width * elem_bytes();
  for (int32_t l = 0; l < cfg_.n_layers; ++l) {
    std::memcpy(K(l, dst), K(l, src), n);
    std::memcpy(V(l, dst), V(l, src), n);
  }
}

void KvStorage::Discard(int32_t first, int32_t n) {
  REWIND_CHECK(first >= 0 && n >= 0 && first + n <= cfg_.n_pages);
  if (n == 0 || PageBytes() == 0) return;
  static const uintptr_t os_page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  auto release = [&](uint8_t* begin, uint8_t* end) {
    const uintptr_t b = (reinterpret_cast<uintptr_t>(begin) + os_page - 1) / os_page * os_page;
    const uintptr_t e = reinterpret_cast<uintptr_t>(end) / os_page * os_page;
    if (b < e) madvise(reinterpret_cast<void*>(b), e - b, MADV_DONTNEED);
  };
  for (int32_t l = 0; l < cfg_.n_layers; ++l) {
    release(K(l, first), K(l, first) + static_cast<uint64_t>(n) * PageBytes());
    release(V(l, first), V(l, first) + static_cast<uint64_t>(n) * PageBytes());
  }
}

}  // namespace rw::model
