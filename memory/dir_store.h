// StoreBackend over a local folder: one file per key, spread over 256 sub-folders by the key's last two
// characters, written atomically (temporary file, rename: base/file.h) and fsynced together by Sync.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "memory/store_backend.h"

namespace rw::memory {

class DirectoryStore final : public StoreBackend {
 public:
  // Creates the folder if needed.
  static Expected<std::unique_ptr<DirectoryStore>> Open(const std::string& dir);

  Expected<std::string> Get(const std::string& key) override;
  using StoreBackend::Put;
  Status PutParts(const std::string& key, std::span<const std::string_view> parts) override;
  Status Sync() override;
  Expected<bool> Exists(const std::string& key) override;
  Status Delete(const std::string& key) override;
  // Also removes temporary files a crash left behind.
  Expected<std::vector<std::string>> Keys() override;
  std::string Describe() const override { return "folder " + dir_; }

 private:
  explicit DirectoryStore(std::string dir) : dir_(std::move(dir)) {}
  std::string PathOf(const std::string& key) const;
  std::string dir_;
  std::mutex mu_;
  std::vector<std::string> unsynced_;  // paths written since the last Sync
};

}  // namespace rw::memory
