// A deterministic text rendering of a GGUF's metadata and tensor layout, one item per line:
//   kv <key> <TYPE> <value>          scalars printed exactly; strings over 64 bytes and arrays over 16
//                                    elements as a length and an FNV-1a hash of their encoding
//   tensor <name> <TYPE> {ne0, ne1} offset=<o> nbytes=<n>
// Used for golden layout comparisons (make-model vs llama.cpp-made files) and inspection.
#pragma once

#include <string>
#include <vector>

#include "gguf/gguf.h"

namespace rw::gguf {

std::string DescribeValue(const Value& v);
std::string DescribeLayout(const File& file);

// Tensors and bytes per tensor type, in type-id order (mixed-type files, e.g. llama.cpp's Q2_K / IQ mixes).
struct TypeTotal {
  TensorType type;
  int64_t tensors = 0;
  int64_t elements = 0;
  uint64_t bytes = 0;
};
std::vector<TypeTotal> TotalsByType(const File& file);

}  // namespace rw::gguf
