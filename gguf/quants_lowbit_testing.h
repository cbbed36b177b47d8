// Test helper (tests only): rows of random low-bit blocks whose float scale fields are finite and small, so that
// every bit pattern of the quants, grid indices, signs and integer scales occurs.
#pragma once

#include <cstring>
#include <random>
#include <vector>

#include "gguf/quants_lowbit.h"

namespace rw::gguf::testing {

inline const TensorType kLowbitTypes[] = {
    TensorType::kQ2_K,   TensorType::kQ3_K,  TensorType::kIQ4_NL, TensorType::kIQ4_XS, TensorType::kIQ3_XXS,
    TensorType::kIQ3_S,  TensorType::kIQ2_XXS, TensorType::kIQ2_XS, TensorType::kIQ2_S, TensorType::kIQ1_S,
    TensorType::kIQ1_M,  TensorType::kTQ1_0, TensorType::kTQ2_0,  TensorType::kMXFP4};

inline std::vector<uint8_t> RandomLowbitRow(TensorType t, int64_t n, std::mt19937& rng) {
  std::vector<uint8_t> row(RowBytes(t, n));
  for (auto& b : row) b = static_cast<uint8_t>(rng());
  const size_t bb = RowBytes(t, BlockSize(t));
  for (size_t b = 0; b < row.size() / bb; ++b) {
    uint8_t* blk = row.data() + b * bb;
    const uint16_t h = Fp32ToFp16(0.01f + 0.001f * static_cast<float>(rng() % 16));
    switch (t) {
      case TensorType::kQ2_K: std::memcpy(blk + 80, &h, 2); std::memcpy(blk + 82, &h, 2); break;
      case TensorType::kQ3_K: std::memcpy(blk + 108, &h, 2); break;
      case TensorType::kTQ1_0: std::memcpy(blk + 52, &h, 2); break;
      case TensorType::kTQ2_0: std::memcpy(blk + 64, &h, 2); break;
      case TensorType::kMXFP4: blk[0] = static_cast<uint8_t>(118 + rng() % 8); break;
      case TensorType::kIQ1_M:  // the f16 scale's 4 nibbles are the top nibbles of the 4 uint16 of scales
        for (int k = 0; k < 4; ++k)
          blk[48 + 2 * k + 1] = static_cast<uint8_t>((blk[48 + 2 * k + 1] & 0x0F) | (((h >> (4 * k)) & 0xF) << 4));
        break;
      default: std::memcpy(blk, &h, 2); break;
    }
  }
  return row;
}

}  // namespace rw::gguf::testing
