// Whole-file helpers and atomic writes (temp file + fsync + rename).
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "base/expected.h"

namespace rw {

Expected<std::string> ReadFileToString(const std::string& path);
// Writes to "<path>.tmp.<pid>", fsyncs (unless durable=false: the caller syncs later), renames over path: readers
// see the old or the new file, never a torn one.
// The file's bytes are the parts one after another (a header and a payload held elsewhere, without a copy).
Status WriteFileAtomic(const std::string& path, std::span<const std::string_view> parts, bool durable = true);
inline Status WriteFileAtomic(const std::string& path, const void* data, size_t size, bool durable = true) {
  const std::string_view part(static_cast<const char*>(data), size);
  return WriteFileAtomic(path, std::span(&part, 1), durable);
}
inline Status WriteFileAtomic(const std::string& path, const std::string& data) {
  return WriteFileAtomic(path, data.data(), data.size());
}
bool FileExists(const std::string& path);
Status MakeDirs(const std::string& path);

}  // namespace rw
