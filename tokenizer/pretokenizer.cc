#include "tokenizer/pretokenizer.h"

#include "tokenizer/unicode.h"

namespace rw::tokenizer {
namespace {

// Per-code-point classes used by the scanner. 0 means "outside the fragment" (llama.cpp's empty flags).
enum : uint8_t {
  kL = 1,        // letter (qwen35: letter or mark)
  kN = 2,        // number
  kW = 4,        // whitespace
  kInside = 8,   // any code point inside the fragment
};

inline uint8_t Classify(uint32_t cpt, bool marks_are_letters) {
  uint8_t out = kInside;
  if (cpt < 0x80) {
    const uint8_t c = static_cast<uint8_t>(cpt);
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return out | kL;
    if (c >= '0' && c <= '9') return out | kN;
    if (c == ' ' || (c >= 0x09 && c <= 0x0D)) return out | kW;
    return out;
  }
  const uint8_t f = CptFlags(cpt);
  if ((f & kFlagLetter) || (marks_are_letters && (f & kFlagMark))) out |= kL;
  if (f & kFlagNumber) out |= kN;
  if (f & kFlagSpace) out |= kW;
  return out;
}

inline uint32_t AsciiLower(uint32_t c) { return (c >= 'A' && c <= 'Z') ? c + 32 : c; }

}  // namespace

bool ParsePreType(std::string_view name, PreType* type) {
  if (name == "qwen2" || name == "deepseek-r1-qwen" || name == "kormo" || name == "f2llmv2" || name == "megrez") {
    *type = PreType::kQwen2;
    return true;
  }
  if (name == "qwen35") {
    *type = PreType::kQwen35;
    return true;
  }
  return false;
}

const char* PreTypeName(PreType type) { return type == PreType::kQwen35 ? "qwen35" : "qwen2"; }

void PreTokenize(PreType type, std::span<const uint32_t> cpts, std::vector<uint32_t>* piece_lengths,
                 std::vector<uint8_t>* scratch) {
  const size_t n = cpts.size();
  const bool marks = type == PreType::kQwen35;
  // [n + 3] classes, padded with zeros so lookahead past the end reads "outside".
  std::vector<uint8_t>& cls = *scratch;
  cls.assign(n + 3, 0);
  for (size_t i = 0; i < n; ++i) cls[i] = Classify(cpts[i], marks);
  auto cpt_at = [&](size_t p) -> uint32_t { return p < n ? cpts[p] : 0xFFFFFFFFu; };

  size_t prev_end = 0;
  auto emit = [&](size_t end) {
    if (end > prev_end) piece_lengths->push_back(static_cast<uint32_t>(end - prev_end));
    prev_end = end;
  };

  size_t pos = 0;
  while (pos < n) {
    const uint32_t c = cpts[pos];
    const uint8_t f = cls[pos];

    // (?i:'s|'t|'re|'ve|'m|'ll|'d)  (Unicode lowercase of a non-ASCII code point is never one of these letters
    // except through KELVIN SIGN etc., which map to letters outside this set.)
    if (c == '\'' && pos + 1 < n) {
      const uint32_t c1 = AsciiLower(cpts[pos + 1]);
      if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') {
        pos += 2;
        emit(pos);
        continue;
      }
      if (pos + 2 < n) {
        const uint32_t c2 = AsciiLower(cpts[pos + 2]);
        if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) {
          pos += 3;
          emit(pos);
          continue;
        }
      }
    }

    // [^\r\n\p{L}\p{N}]?\p{L}+
    if (!(c == '\r' || c == '\n' || (f & kN))) {
      if ((f & kL) || (cls[pos + 1] & kL)) {
        ++pos;
        while (cls[pos] & kL) ++pos;
        emit(pos);
        continue;
      }
    }

    // \p{N}
    if (f & kN) {
      ++pos;
      emit(pos);
      continue;
    }

    // <space>?[^\s\p{L}\p{N}]+[\r\n]*
    uint8_t f2 = (c == ' ') ? cls[pos + 1] : f;
    if (!(f2 & (kW | kL | kN)) && f2 != 0) {
      if (c == ' ') ++pos;
      while (!(f2 & (kW | kL | kN)) && f2 != 0) f2 = cls[++pos];
      uint32_t c2 = cpt_at(pos);
      while (c2 == '\r' || c2 == '\n') c2 = cpt_at(++pos);
      emit(pos);
      continue;
    }

    size_t num_ws = 0;
    size_t last_rn_end = 0;
    while (cls[pos + num_ws] & kW) {
      const uint32_t c2 = cpts[pos + num_ws];
      if (c2 == '\r' || c2 == '\n') last_rn_end = pos + num_ws + 1;
      ++num_ws;
    }
    // \s*[\r\n]+
    if (last_rn_end > 0) {
      pos = last_rn_end;
      emit(pos);
      continue;
    }
    // \s+(?!\S)
    if (num_ws > 1 && pos + num_ws < n) {
      pos += num_ws - 1;
      emit(pos);
      continue;
    }
    // \s+
    if (num_ws > 0) {
      pos += num_ws;
      emit(pos);
      continue;
    }
    // no match
    ++pos;
    emit(pos);
  }
}

}  // namespace rw::tokenizer
