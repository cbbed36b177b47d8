// Test helper for the disk tier: the folder as a process crash (kill -9) leaves it.
#pragma once

#include <filesystem>
#include <string>
#include <system_error>

namespace rw::memory::testing {

// Copies `from` to `to` now: every value and index the store has put is in the page cache, so the copy is what a
// restart after kill -9 would find. Files the writer renames or removes during the copy are skipped (a crash would
// lose those too).
inline void CopyAsACrashLeavesIt(const std::string& from, const std::string& to) {
  std::filesystem::remove_all(to);
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(from, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    const auto dst = to / std::filesystem::relative(it->path(), from);
    std::error_code skip;
    if (it->is_directory(skip)) {
      std::filesystem::create_directories(dst, skip);
    } else {
      std::filesystem::copy_file(it->path(), dst, skip);
    }
  }
}

}  // namespace rw::memory::testing
