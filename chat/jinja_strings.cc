#include "chat/jinja_strings.h"

#include <algorithm>
#include <cstdint>

namespace rw::chat::jinja {
namespace {

bool IsWs(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

bool InSet(char c, const std::string* chars) {
  if (!chars) return IsWs(c);
  return chars->find(c) != std::string::npos;
}

char ToLower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }
char ToUpper(char c) { return (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c; }
bool IsAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

}  // namespace

std::string Strip(std::string_view s, const std::string* chars, bool left, bool right) {
  size_t b = 0, e = s.size();
  if (left) {
    while (b < e && InSet(s[b], chars)) ++b;
  }
  if (right) {
    while (e > b && InSet(s[e - 1], chars)) --e;
  }
  return std::string(s.substr(b, e - b));
}

std::vector<std::string> Split(std::string_view s, const std::string* sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    if (sep->empty()) return {std::string(s)};
    size_t pos = 0;
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
      size_t f = s.find(*sep, pos);
      if (f == std::string_view::npos) break;
      out.emplace_back(s.substr(pos, f - pos));
      pos = f + sep->size();
    }
    out.emplace_back(s.substr(pos));
    return out;
  }
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && IsWs(s[i])) ++i;
    if (i >= s.size()) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit) {
      size_t e = s.size();
      while (e > i && IsWs(s[e - 1])) --e;
      out.emplace_back(s.substr(i, e - i));
      break;
    }
    size_t b = i;
    while (i < s.size() && !IsWs(s[i])) ++i;
    out.emplace_back(s.substr(b, i - b));
  }
  return out;
}

std::vector<std::string> RSplit(std::string_view s, const std::string* sep, int64_t maxsplit) {
  if (maxsplit < 0) return Split(s, sep, maxsplit);
  std::vector<std::string> out;
  if (sep) {
    if (sep->empty()) return {std::string(s)};
    size_t end = s.size();
    while (static_cast<int64_t>(out.size()) < maxsplit) {
      if (end < sep->size()) break;
      size_t f = s.rfind(*sep, end - sep->size());
      if (f == std::string_view::npos) break;
      out.emplace_back(s.substr(f + sep->size(), end - f - sep->size()));
      end = f;
    }
    out.emplace_back(s.substr(0, end));
  } else {
    size_t e = s.size();
    while (true) {
      while (e > 0 && IsWs(s[e - 1])) --e;
      if (e == 0) break;
      if (static_cast<int64_t>(out.size()) >= maxsplit) {
        size_t b = 0;
        while (b < e && IsWs(s[b])) ++b;
        out.emplace_back(s.substr(b, e - b));
        break;
      }
      size_t b = e;
      while (b > 0 && !IsWs(s[b - 1])) --b;
      out.emplace_back(s.substr(b, e - b));
      e = b;
    }
  }
  std::reverse(out.begin(), out.end());
  return out;
}

std::string Replace(std::string_view s, std::string_view from, std::string_view to, int64_t count) {
  std::string out;
  if (from.empty()) {
    // Python inserts `to` between every character (and at both ends).
    int64_t n = 0;
    for (const auto& cp : CodePoints(s)) {
      if (count < 0 || n < count) {
        out += to;
        ++n;
      }
      out += cp;
    }
    if (count < 0 || n < count) out += to;
    return out;
  }
  size_t pos = 0;
  int64_t n = 0;
  while (count < 0 || n < count) {
    size_t f = s.find(from, pos);
    if (f == std::string_view::npos) break;
    out.append(s.substr(pos, f - pos));
    out.append(to);
    pos = f + from.size();
    ++n;
  }
  out.append(s.substr(pos));
  return out;
}

namespace {

// Simple case mapping for ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic (what chat templates meet).
uint32_t MapCase(uint32_t c, bool upper) {
  if (c < 0x80) {
    if (upper && c >= 'a' && c <= 'z') return c - 32;
    if (!upper && c >= 'A' && c <= 'Z') return c + 32;
    return c;
  }
  if (upper) {
    if (c >= 0xE0 && c <= 0xFE && c != 0xF7) return c - 32;
    if (c >= 0x100 && c <= 0x17F && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 && c != 0x178 &&
        c != 0x17F) {
      bool odd_lower = !((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E));
      if (odd_lower ? (c & 1) : !(c & 1)) return c - 1;
      return c;
    }
    if (c >= 0x3B1 && c <= 0x3C9 && c != 0x3C2) return c - 32;
    if (c >= 0x430 && c <= 0x44F) return c - 32;
    if (c >= 0x450 && c <= 0x45F) return c - 80;
  } else {
    if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 32;
    if (c >= 0x100 && c <= 0x17F && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 && c != 0x178 &&
        c != 0x17F) {
      bool odd_lower = !((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E));
      if (odd_lower ? !(c & 1) : (c & 1)) return c + 1;
      return c;
    }
    if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 32;
    if (c >= 0x410 && c <= 0x42F) return c + 32;
    if (c >= 0x400 && c <= 0x40F) return c + 80;
  }
  return c;
}

void PutUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    *out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    *out += static_cast<char>(0xC0 | (cp >> 6));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    *out += static_cast<char>(0xE0 | (cp >> 12));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::string ChangeCase(std::string_view s, bool upper) {
  std::string o;
  o.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      o += static_cast<char>(MapCase(c, upper));
      ++i;
    } else if ((c >> 5) == 0x6 && i + 1 < s.size() && (static_cast<unsigned char>(s[i + 1]) & 0xC0) == 0x80) {
      uint32_t cp = ((c & 0x1Fu) << 6) | (static_cast<unsigned char>(s[i + 1]) & 0x3Fu);
      PutUtf8(MapCase(cp, upper), &o);
      i += 2;
    } else {
      o += static_cast<char>(c);
      ++i;
    }
  }
  return o;
}

}  // namespace

std::string Lower(std::string_view s) { return ChangeCase(s, false); }
std::string Upper(std::string_view s) { return ChangeCase(s, true); }

std::string Title(std::string_view s) {
  std::string o(s);
  bool prev_alpha = false;
  for (auto& c : o) {
    bool alpha = IsAlpha(c) || (static_cast<unsigned char>(c) >= 0x80);
    if (IsAlpha(c)) c = prev_alpha ? ToLower(c) : ToUpper(c);
    prev_alpha = alpha;
  }
  return o;
}

std::string Capitalize(std::string_view s) {
  std::string o = Lower(s);
  if (!o.empty()) o[0] = ToUpper(o[0]);
  return o;
}

int64_t CountOf(std::string_view s, std::string_view sub) {
  if (sub.empty()) return static_cast<int64_t>(CodePointLength(s)) + 1;
  int64_t n = 0;
  size_t pos = 0;
  while ((pos = s.find(sub, pos)) != std::string_view::npos) {
    ++n;
    pos += sub.size();
  }
  return n;
}

std::vector<std::string> CodePoints(std::string_view s) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 1;
    len = std::min(len, s.size() - i);
    out.emplace_back(s.substr(i, len));
    i += len;
  }
  return out;
}

bool IsAscii(std::string_view s) {
  for (char c : s) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

size_t CodePointLength(std::string_view s) {
  size_t n = 0;
  for (char c : s) {
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++n;
  }
  return n;
}

}  // namespace rw::chat::jinja
