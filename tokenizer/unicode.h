// Unicode helpers for the tokenizer: UTF-8 decoding the way llama.cpp does it, code point flags for the
// pre-tokenizer, and the GPT-2 byte-to-unicode alphabet. Spec: ../shared/spec/tokenizer-and-chat.md sections 4-5.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rw::tokenizer {

inline constexpr uint32_t kReplacementChar = 0xFFFD;

// Code point flags (bits). Generated from Unicode data (unicode_ranges.inc).
enum CptFlag : uint8_t {
  kFlagLetter = 1,  // \p{L}
  kFlagNumber = 2,  // \p{N}
  kFlagMark = 4,    // \p{M}
  kFlagSpace = 8,   // \s (White_Space)
};
uint8_t CptFlags(uint32_t cpt);

// Decodes UTF-8 like llama.cpp's unicode_cpts_from_utf8: a lead byte followed by the right number of
// continuation bytes gives its code point (over-long forms and surrogates are accepted); any other byte becomes
// U+FFFD and decoding resumes at the next byte. Deviation: a 4-byte form above U+10FFFF (where llama.cpp
// throws) is treated as an invalid lead byte. Appends to `out`. Returns true if re-encoding the code points gives
// `text` back byte for byte (no invalid byte, no over-long form).
bool DecodeUtf8Lenient(std::string_view text, std::vector<uint32_t>* out);
// Appends the UTF-8 encoding of `cpt` (must be <= 0x10FFFF; surrogates are encoded as 3 bytes).
void AppendUtf8(uint32_t cpt, std::string* out);

// Strict UTF-8: length of the valid sequence starting at text[pos] (1..4), or 0 if the bytes there are not
// a complete valid sequence (over-long, surrogate, > U+10FFFF, bad continuation or truncated).
size_t ValidUtf8SequenceLength(std::string_view text, size_t pos);
// Number of bytes at the end of `text` that form an incomplete-but-so-far-valid UTF-8 sequence (0..3): the
// prefix of a character whose remaining bytes may still arrive.
size_t IncompleteUtf8Tail(std::string_view text);
// Replaces every maximal invalid subpart with U+FFFD (WHATWG / Unicode "best practice"), so the result is valid
// UTF-8. Valid input is returned unchanged.
std::string SanitizeUtf8(std::string_view text);

// GPT-2 byte-level alphabet (section 5).
// The UTF-8 text (1-2 bytes) of the code point that stands for `byte`.
const std::string& ByteToUnicodeUtf8(uint8_t byte);
// The byte a code point stands for, or -1 if it is not in the alphabet.
int UnicodeToByte(uint32_t cpt);

}  // namespace rw::tokenizer
