#include "vision/image_pipeline.h"

#include <chrono>
#include <cstring>

namespace rw::vision {

std::vector<int32_t> ImageTokenIds(const Digest256& key, int32_t n) {
  std::vector<int32_t> ids(n);
  for (int32_t i = 0; i < n; ++i) {
    Sha256Hasher h;
    h.Update(key.data(), key.size());
    h.Update(&i, sizeof(i));
    const Digest256 d = h.Final();
    uint32_t v;
    std::memcpy(&v, d.data(), sizeof(v));
    ids[i] = kImageTokenBase + static_cast<int32_t>(v & (kImageTokenBase - 1));
  }
  return ids;
}

ImagePipeline::ImagePipeline(std::unique_ptr<Mmproj> mmproj, const PipelineOptions& options)
    : mm_(std::move(mmproj)), opt_(options), encoder_(*mm_, options.n_threads), cache_(options.cache_bytes) {}

Expected<std::unique_ptr<ImagePipeline>> ImagePipeline::Load(const std::string& mmproj_path,
                                                             const PipelineOptions& options) {
  if (options.preprocess.min_tokens < 1 || options.preprocess.max_tokens < options.preprocess.min_tokens)
    return Error::InvalidArgument("--image-min-tokens must be >= 1 and <= --image-max-tokens");
  REWIND_ASSIGN_OR_RETURN(auto mm, Mmproj::Load(mmproj_path));
  return std::make_unique<ImagePipeline>(std::move(mm), options);
}

Expected<EncodedImage> ImagePipeline::Encode(std::span<const uint8_t> bytes) {
  REWIND_ASSIGN_OR_RETURN(RgbImage img, DecodeImage(bytes, opt_.limits));
  EncodedImage out;
  out.key = ImageKey(img, mm_->identity(), opt_.preprocess);
  if (auto hit = cache_.Get(out.key)) {
    out.embedding = std::move(hit);
    out.cached = true;
    return out;
  }
  const PreparedImage prepared = Prepare(img, mm_->config(), opt_.preprocess);
  const auto t0 = std::chrono::steady_clock::now();
  Expected<ImageEmbedding> e = [&] {
    std::lock_guard<std::mutex> lock(encode_mu_);
    return encoder_.Encode(prepared);
  }();
  if (!e) return e.error();
  out.encode_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  out.embedding = std::make_shared<const ImageEmbedding>(std::move(e).value());
  cache_.Put(out.key, out.embedding);
  return out;
}

}  // namespace rw::vision
