#include "memory/dir_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>
#include <system_error>

#include "base/file.h"

namespace rw::memory {

bool ValidStoreKey(std::string_view key) {
  if (key.empty() || key.size() > 128) return false;
  for (char c : key)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  return true;
}

namespace {

Error BadKey(const std::string& key) { return Error::InvalidArgument("invalid store key '" + key + "'"); }

}  // namespace

Expected<std::unique_ptr<DirectoryStore>> DirectoryStore::Open(const std::string& dir) {
  if (dir.empty()) return Error::InvalidArgument("store folder is empty");
  REWIND_RETURN_IF_ERROR(MakeDirs(dir));
  return std::unique_ptr<DirectoryStore>(new DirectoryStore(dir));
}

std::string DirectoryStore::PathOf(const std::string& key) const {
  const std::string sub = key.size() >= 2 ? key.substr(key.size() - 2) : key;
  return dir_ + "/" + sub + "/" + key;
}

Expected<std::string> DirectoryStore::Get(const std::string& key) {
  if (!ValidStoreKey(key)) return BadKey(key);
  const std::string path = PathOf(key);
  if (!FileExists(path)) return Error::NotFound("no value for key " + key);
  return ReadFileToString(path);
}

Status DirectoryStore::PutParts(const std::string& key, std::span<const std::string_view> parts) {
  if (!ValidStoreKey(key)) return BadKey(key);
  size_t bytes = 0;
  for (std::string_view p : parts) bytes += p.size();
  if (bytes > kMaxStoreValueBytes)
    return Error::OutOfRange("value of " + std::to_string(bytes) + " B exceeds the store's bound");
  const std::string path = PathOf(key);
  REWIND_RETURN_IF_ERROR(MakeDirs(path.substr(0, path.find_last_of('/'))));
  REWIND_RETURN_IF_ERROR(WriteFileAtomic(path, parts, /*durable=*/false));
  std::lock_guard<std::mutex> lock(mu_);
  unsynced_.push_back(path);
  return Status::Ok();
}

Status DirectoryStore::Sync() {
  std::vector<std::string> paths;
  {
    std::lock_guard<std::mutex> lock(mu_);
    paths.swap(unsynced_);
  }
  auto fsync_path = [](const std::string& p) -> Status {
    const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Status::Ok();  // deleted since (evicted): nothing to make durable
    const int rc = ::fsync(fd);
    ::close(fd);
    if (rc != 0) return Error::Io("fsync of " + p + " failed: " + std::strerror(errno));
    return Status::Ok();
  };
  std::set<std::string> dirs = {dir_};  // the renames live in the folders
  for (const std::string& p : paths) {
    REWIND_RETURN_IF_ERROR(fsync_path(p));
    dirs.insert(p.substr(0, p.find_last_of('/')));
  }
  for (const std::string& d : dirs) REWIND_RETURN_IF_ERROR(fsync_path(d));
  return Status::Ok();
}

Expected<bool> DirectoryStore::Exists(const std::string& key) {
  if (!ValidStoreKey(key)) return BadKey(key);
  return FileExists(PathOf(key));
}

Status DirectoryStore::Delete(const std::string& key) {
  if (!ValidStoreKey(key)) return BadKey(key);
  std::error_code ec;
  std::filesystem::remove(PathOf(key), ec);
  if (ec) return Error::Io("cannot delete " + PathOf(key) + ": " + ec.message());
  return Status::Ok();
}

Expected<std::vector<std::string>> DirectoryStore::Keys() {
  std::vector<std::string> keys;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir_, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_regular_file()) continue;
    const std::string name = it->path().filename().string();
    if (name.find(".tmp.") != std::string::npos) {
      std::error_code rm;
      std::filesystem::remove(it->path(), rm);  // a write cut short by a crash
      continue;
    }
    if (ValidStoreKey(name) && it->path().string() == PathOf(name)) keys.push_back(name);
  }
  if (ec) return Error::Io("cannot list " + dir_ + ": " + ec.message());
  return keys;
}

}  // namespace rw::memory
