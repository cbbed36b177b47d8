// Pre-tokenizer: splits a raw text fragment into the pieces that BPE merges independently. A hand-written scanner
// equivalent to the Qwen regexes, identical to llama.cpp's (spec section 4):
//   qwen2:  (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//   qwen35: the same with \p{M} added to the letter classes.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace rw::tokenizer {

enum class PreType { kQwen2, kQwen35 };

// Maps a tokenizer.ggml.pre value to its type; false if rewind does not implement it.
bool ParsePreType(std::string_view name, PreType* type);
const char* PreTypeName(PreType type);

// Appends the length (in code points) of each piece of `cpts`, in order; the lengths sum to cpts.size().
// `scratch` is reused between calls to avoid allocations.
void PreTokenize(PreType type, std::span<const uint32_t> cpts, std::vector<uint32_t>* piece_lengths,
                 std::vector<uint8_t>* scratch);

}  // namespace rw::tokenizer
