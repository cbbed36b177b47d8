// Test-only: the Hugging Face pre-tokenizer regexes run through PCRE2 (UTF + UCP + JIT), used to cross-check the
// hand-written scanner. \s is spelled out as Unicode White_Space (what llama.cpp uses) because PCRE2's UCP \s
// leaves out U+0085.
#pragma once

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/pretokenizer.h"

namespace rw::tokenizer::testing {

class Pcre2Splitter {
 public:
  explicit Pcre2Splitter(PreType type) {
    const std::string ws = "\\t-\\r \\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}";
    const std::string s = "[" + ws + "]", not_s = "[^" + ws + "]";
    const std::string l = type == PreType::kQwen35 ? "\\p{L}\\p{M}" : "\\p{L}";
    const std::string re = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n" + l + "\\p{N}]?[" + l + "]+|\\p{N}| ?[^" + ws + l +
                           "\\p{N}]+[\\r\\n]*|" + s + "*[\\r\\n]+|" + s + "+(?!" + not_s + ")|" + s + "+";
    int err = 0;
    PCRE2_SIZE err_off = 0;
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(re.c_str()), re.size(), PCRE2_UTF | PCRE2_UCP, &err, &err_off,
                          nullptr);
    if (code_) {
      pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);
      md_ = pcre2_match_data_create_from_pattern(code_, nullptr);
    }
  }
  ~Pcre2Splitter() {
    if (md_) pcre2_match_data_free(md_);
    if (code_) pcre2_code_free(code_);
  }
  bool ok() const { return code_ != nullptr; }

  // Pieces of valid UTF-8 text; text between matches (never expected) is returned as its own piece.
  std::vector<std::string> Split(std::string_view text) const {
    std::vector<std::string> out;
    size_t pos = 0;
    while (pos < text.size()) {
      int rc = pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), pos, 0, md_, nullptr);
      if (rc < 0) {
        out.emplace_back(text.substr(pos));
        break;
      }
      PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md_);
      if (ov[0] > pos) out.emplace_back(text.substr(pos, ov[0] - pos));
      if (ov[1] == ov[0]) {  // empty match: cannot happen with these patterns; avoid looping
        out.emplace_back(text.substr(ov[0]));
        break;
      }
      out.emplace_back(text.substr(ov[0], ov[1] - ov[0]));
      pos = ov[1];
    }
    return out;
  }

 private:
  pcre2_code* code_ = nullptr;
  pcre2_match_data* md_ = nullptr;
};

}  // namespace rw::tokenizer::testing
