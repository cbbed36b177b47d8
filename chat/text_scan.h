// Small helpers for scanning model output (shared by the output parsers in chat/).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

namespace rw::chat {

inline bool IsWs(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

inline size_t SkipWs(std::string_view s, size_t i) {
  while (i < s.size() && IsWs(s[i])) ++i;
  return i;
}

inline bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

// True when `rest` could still become `tag` (a proper prefix of it).
inline bool MayBecome(std::string_view rest, std::string_view tag) {
  return rest.size() < tag.size() && StartsWith(tag, rest);
}

// Length of the longest suffix of s that is a proper prefix of tag.
inline size_t PartialTagSuffix(std::string_view s, std::string_view tag) {
  size_t max = std::min(s.size(), tag.size() - 1);
  for (size_t n = max; n > 0; --n) {
    if (s.substr(s.size() - n) == tag.substr(0, n)) return n;
  }
  return 0;
}

// A code point as UTF-8.
inline void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    *out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    *out += static_cast<char>(0xC0 | (cp >> 6));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    *out += static_cast<char>(0xE0 | (cp >> 12));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    *out += static_cast<char>(0xF0 | (cp >> 18));
    *out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

inline std::string Trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && IsWs(s[b])) ++b;
  while (e > b && IsWs(s[e - 1])) --e;
  return std::string(s.substr(b, e - b));
}

}  // namespace rw::chat
