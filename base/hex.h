// Lower-case hexadecimal text of hashes, fingerprints and bytes (file names, keys, messages).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace rw {

// 16 digits, most significant first.
inline std::string HexU64(uint64_t v) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) out[i] = kDigits[v & 15];
  return out;
}

// Two digits per byte, in order.
inline std::string HexBytes(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * bytes.size());
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

}  // namespace rw
