// Random weights drawn directly as K-quant blocks (Q4_K, Q5_K, Q6_K), without drawing floats and running the
// quantiser's scale search: each quant is an independent draw from a discretised normal (levels symmetric around
// the block's zero), with one scale per block chosen so the dequantised values have the tensor's mean and
// standard deviation. About 100x cheaper per weight than Normal() + QuantizeRow, which made the 9B Q4_K_M bench
// file take minutes (docs/make-model.md). Deterministic: every row has its own stream (RowSeed).
#pragma once

#include <cstdint>

#include "gguf/types.h"
#include "modelgen/tensor_plan.h"

namespace rw::modelgen {

// True when RandomQuantRow draws rows of `type` for tensor t (K-quant types, normal init; Q6_K, which has no
// block minimum, only for zero-mean tensors).
bool DrawsQuantBlocks(gguf::TensorType type, const TensorSpec& t);

// Row `row` of tensor t as n / 256 blocks of `type` (DrawsQuantBlocks(type, t) must hold), stream seeded by seed.
void RandomQuantRow(gguf::TensorType type, const TensorSpec& t, uint64_t seed, int64_t row, uint8_t* dst, int64_t n);

// Standard deviation of the discretised level distribution used for `type`, in units of one level (tests).
double QuantLevelStd(gguf::TensorType type);

}  // namespace rw::modelgen
