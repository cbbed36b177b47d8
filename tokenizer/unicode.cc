#include "tokenizer/unicode.h"

#include <array>
#include <memory>
#include <unordered_map>

namespace rw::tokenizer {
namespace {

struct Range {
  uint32_t first, last;
  uint8_t flags;
};
constexpr Range kRanges[] = {
#include "tokenizer/unicode_ranges.inc"
};

constexpr uint32_t kMaxCpt = 0x110000;
constexpr uint32_t kBlock = 256;

// Two-level table: block index -> 256 flags. Blocks with identical contents share storage.
struct FlagTable {
  std::vector<uint16_t> block_of;  // [kMaxCpt / kBlock]
  std::vector<uint8_t> blocks;     // [n_unique_blocks][kBlock]

  FlagTable() {
    std::vector<uint8_t> flat(kMaxCpt, 0);  // [kMaxCpt]
    for (const Range& r : kRanges) {
      for (uint32_t c = r.first; c <= r.last && c < kMaxCpt; ++c) flat[c] |= r.flags;
    }
    block_of.resize(kMaxCpt / kBlock);
    std::unordered_map<std::string, uint16_t> seen;
    for (uint32_t b = 0; b < kMaxCpt / kBlock; ++b) {
      std::string key(reinterpret_cast<const char*>(flat.data() + b * kBlock), kBlock);
      auto [it, inserted] = seen.emplace(std::move(key), static_cast<uint16_t>(seen.size()));
      if (inserted) blocks.insert(blocks.end(), flat.data() + b * kBlock, flat.data() + (b + 1) * kBlock);
      block_of[b] = it->second;
    }
  }
};

const FlagTable& Table() {
  static const FlagTable* table = new FlagTable();
  return *table;
}

struct ByteAlphabet {
  std::array<std::string, 256> utf8;
  std::array<int16_t, 512> byte_of;  // code points < 0x200 only

  ByteAlphabet() {
    byte_of.fill(-1);
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      bool keep = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      uint32_t cpt = keep ? static_cast<uint32_t>(b) : static_cast<uint32_t>(next++);
      AppendUtf8(cpt, &utf8[b]);
      byte_of[cpt] = static_cast<int16_t>(b);
    }
  }
};

const ByteAlphabet& Alphabet() {
  static const ByteAlphabet* a = new ByteAlphabet();
  return *a;
}

inline bool IsCont(uint8_t c) { return (c & 0xC0) == 0x80; }

}  // namespace

uint8_t CptFlags(uint32_t cpt) {
  if (cpt >= kMaxCpt) return 0;
  const FlagTable& t = Table();
  return t.blocks[static_cast<size_t>(t.block_of[cpt / kBlock]) * kBlock + cpt % kBlock];
}

bool DecodeUtf8Lenient(std::string_view text, std::vector<uint32_t>* out) {
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  bool canonical = true;
  size_t i = 0;
  while (i < n) {
    const uint8_t c = s[i];
    if (c < 0x80) {
      out->push_back(c);
      i += 1;
    } else if ((c & 0xE0) == 0xC0 && i + 1 < n && IsCont(s[i + 1])) {
      const uint32_t cpt = ((c & 0x1Fu) << 6) | (s[i + 1] & 0x3Fu);
      canonical &= cpt >= 0x80;
      out->push_back(cpt);
      i += 2;
    } else if ((c & 0xF0) == 0xE0 && i + 2 < n && IsCont(s[i + 1]) && IsCont(s[i + 2])) {
      const uint32_t cpt = ((c & 0x0Fu) << 12) | ((s[i + 1] & 0x3Fu) << 6) | (s[i + 2] & 0x3Fu);
      canonical &= cpt >= 0x800;
      out->push_back(cpt);
      i += 3;
    } else if ((c & 0xF8) == 0xF0 && i + 3 < n && IsCont(s[i + 1]) && IsCont(s[i + 2]) && IsCont(s[i + 3])) {
      const uint32_t cpt = ((c & 0x07u) << 18) | ((s[i + 1] & 0x3Fu) << 12) | ((s[i + 2] & 0x3Fu) << 6) |
                           (s[i + 3] & 0x3Fu);
      if (cpt <= 0x10FFFF) {
        canonical &= cpt >= 0x10000;
        out->push_back(cpt);
        i += 4;
      } else {
        canonical = false;
        out->push_back(kReplacementChar);
        i += 1;
      }
    } else {
      canonical = false;
      out->push_back(kReplacementChar);
      i += 1;
    }
  }
  return canonical;
}

void AppendUtf8(uint32_t cpt, std::string* out) {
  if (cpt < 0x80) {
    out->push_back(static_cast<char>(cpt));
  } else if (cpt < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cpt >> 6)));
    out->push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else if (cpt < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cpt >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cpt >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cpt >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  }
}

size_t ValidUtf8SequenceLength(std::string_view text, size_t pos) {
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  if (pos >= n) return 0;
  const uint8_t c = s[pos];
  if (c < 0x80) return 1;
  size_t len;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (pos + len > n) return 0;
  if (s[pos + 1] < lo || s[pos + 1] > hi) return 0;
  for (size_t k = 2; k < len; ++k) {
    if (!IsCont(s[pos + k])) return 0;
  }
  return len;
}

namespace {
// Length of the longest prefix of text[pos..] that is a valid beginning of a UTF-8 sequence (0 if text[pos] is
// not a valid lead byte).
size_t ValidPrefixLength(std::string_view text, size_t pos) {
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  const uint8_t c = s[pos];
  size_t len;
  uint8_t lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  size_t k = 1;
  if (pos + 1 < n && s[pos + 1] >= lo && s[pos + 1] <= hi) {
    k = 2;
    while (k < len && pos + k < n && IsCont(s[pos + k])) ++k;
  }
  return k;
}
}  // namespace

size_t IncompleteUtf8Tail(std::string_view text) {
  const size_t n = text.size();
  // A character is at most 4 bytes, so an incomplete one starts within the last 3.
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const size_t pos = n - back;
    const auto c = static_cast<uint8_t>(text[pos]);
    if (IsCont(c)) continue;
    if (c < 0x80) return 0;
    const size_t prefix = ValidPrefixLength(text, pos);
    const size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
    return (prefix == back && back < need) ? back : 0;
  }
  return 0;
}

std::string SanitizeUtf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    size_t len = ValidUtf8SequenceLength(text, i);
    if (len > 0) {
      out.append(text.data() + i, len);
      i += len;
      continue;
    }
    // Maximal invalid subpart: a valid prefix of a sequence, or one byte.
    size_t skip = ValidPrefixLength(text, i);
    AppendUtf8(kReplacementChar, &out);
    i += skip == 0 ? 1 : skip;
  }
  return out;
}

const std::string& ByteToUnicodeUtf8(uint8_t byte) { return Alphabet().utf8[byte]; }

int UnicodeToByte(uint32_t cpt) { return cpt < 512 ? Alphabet().byte_of[cpt] : -1; }

}  // namespace rw::tokenizer
