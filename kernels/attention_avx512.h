// The AVX-512 tiles of the attention kernel (kernels/attention.h), compiled with -mavx512f -mavx512dq -mf16c
// -ffp-contract=off and called only after the CPU check in attention.cc. They give the bits of the 256-bit
// and portable tiles:
//   - keys are packed per block in lane groups, pk[(d / 8)·kAttnBlock·8 + p·8 + d % 8] (each key's 8-lane chunk
//     of dims d..d+7 next to the next key's), so one 16-lane register holds the same 8 lanes of two keys and every
//     lane does the FMAs of attention.h's dot product in ascending d; the lanes are then summed in its tree;
//   - value updates are element-wise (acc = acc·c, then fma(e_p, v_p, acc) in ascending p), so any width gives
//     the same bits.
#pragma once

#include <cstdint>

#include "kernels/attention.h"

namespace rw::kernels::attention_avx512 {

// Packs one key row (D floats, D % 8 == 0) as key p of the block at pk.
void PackKeyF32(const float* row, int32_t D, int32_t p, float* pk);
// The same from a half-precision row (exact conversion).
void PackKeyF16(const uint16_t* row, int32_t D, int32_t p, float* pk);

// out[i·kAttnBlock + c] = dot(q[i], key p0 + c)·scale for i < 4, c < 8; p0 a multiple of 8.
void ScoreTile4x8(const float* const* q, const float* pk, int32_t p0, int32_t D, float scale, float* out);

// Four queries with the same nb keys: acc[i] = acc[i]·corr[i], then acc[i] = fma(e[i][p], vrow[p], acc[i]) for
// p < nb in ascending p, per element.
void ValueTile4(float* const* acc, const float* corr, const float* const* e, const float* const* vrow, int32_t nb,
                int32_t D);
// One query.
void ValueOne(float* acc, float corr, const float* e, const float* const* vrow, int32_t nb, int32_t D);

}  // namespace rw::kernels::attention_avx512
