// Internal to quants.cc / quants_k.cc: the K formats (Q4_K, Q5_K, Q6_K, Q8_K). Use gguf/quants.h instead.
#pragma once

#include <cstdint>

#include "gguf/quants.h"

namespace rw::gguf {

void DequantQ4_K(const BlockQ4_K* x, float* y, int64_t nb);
void DequantQ5_K(const BlockQ5_K* x, float* y, int64_t nb);
void DequantQ6_K(const BlockQ6_K* x, float* y, int64_t nb);
void DequantQ8_K(const BlockQ8_K* x, float* y, int64_t nb);

void QuantQ4_K(const float* x, BlockQ4_K* y, int64_t nb);
void QuantQ5_K(const float* x, BlockQ5_K* y, int64_t nb);
void QuantQ6_K(const float* x, BlockQ6_K* y, int64_t nb);
void QuantQ8_K(const float* x, BlockQ8_K* y, int64_t nb);

float DotQ4_K(const BlockQ4_K* x, const BlockQ8_K* y, int64_t nb);
float DotQ5_K(const BlockQ5_K* x, const BlockQ8_K* y, int64_t nb);
float DotQ6_K(const BlockQ6_K* x, const BlockQ8_K* y, int64_t nb);

}  // namespace rw::gguf
