// Lookup tables of the IQ weight formats (codebooks), generated from llama.cpp v0.5.0's ggml-common.h by
// scripts/gen-quant-grids.py into quant_grids.cc and quant_grids_iq1s.cc. Each uint64_t entry holds 8 bytes
// (element j = byte j, little-endian), each uint32_t entry 4 bytes; IQ2/IQ3 entries are magnitudes (unsigned),
// IQ1 entries are int8 values in {-1, 0, 1}.
#pragma once

#include <cstdint>

namespace rw::gguf::grids {

extern const uint64_t kIq2xxsGrid[256];
extern const uint64_t kIq2xsGrid[512];
extern const uint64_t kIq2sGrid[1024];
extern const uint32_t kIq3xxsGrid[256];
extern const uint32_t kIq3sGrid[512];
extern const uint64_t kIq1sGrid[2048];
extern const int8_t kIq4nlValues[16];  // IQ4_NL / IQ4_XS non-linear values
extern const int8_t kFp4Values[16];    // MXFP4: E2M1 values times 2

// ksigns_iq2xs: 7 sign bits plus an eighth that makes the number of set bits even (the format stores 7).
constexpr uint8_t SignsWithParity(uint32_t seven_bits) {
  const uint32_t s = seven_bits & 127;
  return static_cast<uint8_t>(s | ((__builtin_popcount(s) & 1) << 7));
}

}  // namespace rw::gguf::grids
