// Little-endian fixed-width fields for the on-disk formats (persist_format.cc, store_format.cc).
#pragma once

#include <bit>
#include <cstddef>
#include <cstring>
#include <string>
#include <string_view>

namespace rw::memory {

static_assert(std::endian::native == std::endian::little, "the on-disk formats are little endian");

// Appends v's bytes.
template <typename T>
void Put(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(T));
}

// Reads a T at byte `at` (the caller checked the bounds).
template <typename T>
T Get(std::string_view b, size_t at) {
  T v;
  std::memcpy(&v, b.data() + at, sizeof(T));
  return v;
}

}  // namespace rw::memory
