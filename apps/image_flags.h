// The image-input flags shared by `rewind serve` and `rewind run` (docs/images.md) and the vision pipeline they
// configure: --mmproj, --image-min-tokens / --image-max-tokens (llama.cpp's names and defaults), limits per image
// and request, the encoder-output cache.
#pragma once

#include <cstdint>
#include <memory>
#include <functional>
#include <string>
#include <vector>

#include "base/expected.h"
#include "base/flags.h"
#include "engine/engine.h"
#include "model/image_positions.h"
#include "vision/image_pipeline.h"

namespace rw::apps {

struct ImageFlags {
  std::string mmproj;
  int min_tokens = 8;
  int max_tokens = 4096;
  int64_t max_bytes_mib = 20;
  int64_t max_megapixels = 40;
  int max_count = 16;
  int64_t cache_mib = 256;

  void Declare(FlagSet& flags);
  // Null without --mmproj. Errors: a model that does not take images, a projector whose output width differs
  // from the model's embedding length, a bad mmproj file, bad flag values.
  Expected<std::unique_ptr<vision::ImagePipeline>> Load(const engine::EngineInfo& info, int32_t n_threads) const;
};

// `rewind run --image`: the prompt text with each "<__media__>" marker (llama.cpp's default; one is put at the
// start when there is none) replaced by <|vision_start|>, the image's placeholder ids and <|vision_end|>, as
// llama.cpp's mtmd_tokenize does. `encode` tokenises text (parse_special, no BOS).
struct RunImagePrompt {
  std::vector<int32_t> tokens;
  std::vector<model::ImageSpan> spans;  // rows owned by `embeddings`
  std::vector<std::shared_ptr<const vision::ImageEmbedding>> embeddings;
  double encode_ms = 0;  // time in the vision tower (all images)
};
Expected<RunImagePrompt> BuildRunImagePrompt(const std::string& prompt, const std::vector<std::string>& image_files,
                                             vision::ImagePipeline& pipeline,
                                             const std::function<std::vector<int32_t>(const std::string&)>& encode);

}  // namespace rw::apps
