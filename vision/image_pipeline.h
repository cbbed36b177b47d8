// From image bytes to the language model's input rows: decode (limits), content key, the encoder-output cache,
// preprocessing and the vision tower. Thread-safe: request threads call Encode concurrently; the tower itself runs
// one image at a time on its own thread pool (a second request waits for it rather than oversubscribing the CPU).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "base/expected.h"
#include "vision/image_cache.h"

namespace rw::vision {

struct PipelineOptions {
  ImageLimits limits;
  PreprocessOptions preprocess;
  int64_t cache_bytes = int64_t{256} << 20;  // encoder outputs kept for repeated images
  int32_t n_threads = 1;
};

struct EncodedImage {
  Digest256 key{};
  std::shared_ptr<const ImageEmbedding> embedding;
  bool cached = false;      // served from the encoder cache
  double encode_ms = 0;     // time in the tower (0 when cached)
};

// Placeholder token ids of an image: n ids in [2^30, 2^31), each from the SHA-256 of (key, index), so two
// different images differ at their first token except with probability 2^-30 (docs/images.md).
std::vector<int32_t> ImageTokenIds(const Digest256& key, int32_t n);
inline constexpr int32_t kImageTokenBase = 1 << 30;

class ImagePipeline {
 public:
  ImagePipeline(std::unique_ptr<Mmproj> mmproj, const PipelineOptions& options);
  static Expected<std::unique_ptr<ImagePipeline>> Load(const std::string& mmproj_path, const PipelineOptions& options);

  // Errors: the decoder's (kInvalidArgument, kOutOfRange), the tower's.
  Expected<EncodedImage> Encode(std::span<const uint8_t> bytes);
  const PipelineOptions& options() const { return opt_; }
  const Mmproj& mmproj() const { return *mm_; }
  const EmbeddingCache& cache() const { return cache_; }

 private:
  std::unique_ptr<Mmproj> mm_;
  PipelineOptions opt_;
  VisionEncoder encoder_;
  EmbeddingCache cache_;
  std::mutex encode_mu_;
};

}  // namespace rw::vision
