// Requests with images (docs/images.md), engine side: validation of the image spans against the prompt and the
// model, the model's view of them, checkpoint hints at their boundaries, and the text tokens the sampler's
// penalties see.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/expected.h"
#include "engine/engine.h"
#include "model/image_positions.h"

namespace rw::engine {

// Token ids and image spans: every id outside a span is in [0, n_vocab); spans are sorted, disjoint, inside the
// prompt, with nx·ny·n_embd rows; images only for models that take them. Errors are kInvalidArgument.
Status ValidatePromptImages(const GenerationRequest& r, const EngineInfo& info);
// The model's view (rows stay owned by `images`). Call after ValidatePromptImages.
model::SeqImages MakeSeqImages(const std::vector<PromptImage>& images);
// Adds checkpoint hints at each image's first token and just after the token that closes it (<|vision_end|>),
// so a new question about the same image resumes after it. Keeps the hints sorted, unique and < prompt size.
void AddImageCheckpointHints(GenerationRequest& r);
// The prompt without image placeholder ids (ids >= n_vocab), for the penalties' history.
std::vector<int32_t> TextTokens(std::span<const int32_t> prompt, int32_t n_vocab);

}  // namespace rw::engine
