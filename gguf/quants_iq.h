// Internal to quants_lowbit.cc / quants_iq.cc: the integer decoders of the grid formats (IQ1_S, IQ1_M, IQ2_XXS,
// IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S). Use gguf/quants_lowbit.h instead.
#pragma once

#include <cstring>

#include "gguf/quants_lowbit.h"

namespace rw::gguf {

// For the formats without mins.
inline void ClearMins(DecodedK* out) {
  std::memset(out->mins, 0, sizeof(out->mins));
  out->dmin = 0.0f;
}

void DecodeIQ2_XXS(const BlockIQ2_XXS* x, DecodedK* out);
void DecodeIQ2_XS(const BlockIQ2_XS* x, DecodedK* out);
void DecodeIQ2_S(const BlockIQ2_S* x, DecodedK* out);
void DecodeIQ3_XXS(const BlockIQ3_XXS* x, DecodedK* out);
void DecodeIQ3_S(const BlockIQ3_S* x, DecodedK* out);
void DecodeIQ1_S(const BlockIQ1_S* x, DecodedK* out);
void DecodeIQ1_M(const BlockIQ1_M* x, DecodedK* out);

}  // namespace rw::gguf
