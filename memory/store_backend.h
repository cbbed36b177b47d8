// The seam under the disk tier (docs/cache-budget.md, "Disk tier"): a key-value store of bounded-size values.
// The content-addressed store (memory/content_store.h) keeps attention pages, recurrent states and its index
// in one, through nothing but these calls, so that a remote service (Redis: GET/SET/EXISTS/DEL/SCAN) can sit
// behind it as well as a local folder (memory/dir_store.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/expected.h"

namespace rw::memory {

// The largest value a backend must hold (Redis strings are bounded by 512 MiB).
inline constexpr size_t kMaxStoreValueBytes = size_t{512} << 20;

// Keys are 1..128 characters of [a-z0-9-]: safe as file names and as Redis keys.
bool ValidStoreKey(std::string_view key);

class StoreBackend {
 public:
  virtual ~StoreBackend() = default;
  // kNotFound when absent. A value is returned whole or not at all.
  virtual Expected<std::string> Get(const std::string& key) = 0;
  // Stores the parts one after another as the key's value (a header and a payload held elsewhere: no copy).
  // Atomic: a reader (or a restart after a process crash) sees the old value or the new one, never a torn one.
  // kOutOfRange above kMaxStoreValueBytes; kIo when the medium refuses it (disk full).
  virtual Status PutParts(const std::string& key, std::span<const std::string_view> parts) = 0;
  Status Put(const std::string& key, std::string_view value) { return PutParts(key, std::span(&value, 1)); }
  // Makes every Put so far durable (power loss); the store calls it before writing an index naming new values.
  virtual Status Sync() = 0;
  virtual Expected<bool> Exists(const std::string& key) = 0;
  // Absent keys are fine.
  virtual Status Delete(const std::string& key) = 0;
  // Every key (order unspecified): used once at start to sweep values no index names (a crash between writing a
  // value and the index that names it).
  virtual Expected<std::vector<std::string>> Keys() = 0;
  // For logs: "folder /path", "redis host:port".
  virtual std::string Describe() const = 0;
};

}  // namespace rw::memory
