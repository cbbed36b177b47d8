#include "apps/image_flags.h"

#include "base/file.h"

namespace rw::apps {

void ImageFlags::Declare(FlagSet& flags) {
  flags.Add("mmproj", 0, &mmproj,
            "vision projector GGUF (llama.cpp's qwen3vl_merger mmproj of a Qwen3.5 / Qwen3.6 model): enables image "
            "input (none: images are refused)");
  flags.Alias("-mm", "mmproj");
  flags.Add("image-min-tokens", 0, &min_tokens, "images are scaled up to at least this many tokens (llama.cpp's default)");
  flags.Add("image-max-tokens", 0, &max_tokens, "images are scaled down to at most this many tokens (llama.cpp's default)");
  flags.Add("image-max-bytes", 0, &max_bytes_mib, "largest encoded image accepted, MiB");
  flags.Add("image-max-pixels", 0, &max_megapixels, "largest decoded image accepted, megapixels (2^20 pixels)");
  flags.Add("image-max-count", 0, &max_count, "most images in one request");
  flags.Add("image-cache", 0, &cache_mib, "encoder outputs kept for repeated images, MiB");
}

Expected<std::unique_ptr<vision::ImagePipeline>> ImageFlags::Load(const engine::EngineInfo& info,
                                                                  int32_t n_threads) const {
  if (mmproj.empty()) return std::unique_ptr<vision::ImagePipeline>();
  if (!info.images)
    return Error::InvalidArgument("--mmproj: the model (" + info.arch +
                                  ") does not take images; only qwen35 / qwen35moe (Qwen3.5, Qwen3.6) do");
  if (max_bytes_mib < 1 || max_megapixels < 1 || max_count < 1 || cache_mib < 0)
    return Error::InvalidArgument("--image-max-bytes, --image-max-pixels and --image-max-count must be >= 1");
  vision::PipelineOptions opt;
  opt.preprocess.min_tokens = min_tokens;
  opt.preprocess.max_tokens = max_tokens;
  opt.limits.max_bytes = max_bytes_mib << 20;
  opt.limits.max_pixels = max_megapixels << 20;
  opt.limits.max_images = max_count;
  opt.cache_bytes = cache_mib << 20;
  opt.n_threads = n_threads;
  REWIND_ASSIGN_OR_RETURN(auto p, vision::ImagePipeline::Load(mmproj, opt));
  if (p->mmproj().config().n_out != info.n_embd)
    return Error::InvalidArgument("--mmproj: the projector outputs rows of " + std::to_string(p->mmproj().config().n_out) +
                                  ", the model's embedding length is " + std::to_string(info.n_embd) +
                                  ": is it the mmproj of another model?");
  return p;
}

Expected<RunImagePrompt> BuildRunImagePrompt(const std::string& prompt, const std::vector<std::string>& image_files,
                                             vision::ImagePipeline& pipeline,
                                             const std::function<std::vector<int32_t>(const std::string&)>& encode) {
  const std::string marker = "<__media__>";
  std::string text = prompt;
  size_t n_markers = 0;
  for (size_t at = text.find(marker); at != std::string::npos; at = text.find(marker, at + marker.size())) ++n_markers;
  if (n_markers == 0) {
    for (size_t i = 0; i < image_files.size(); ++i) text = marker + text;
    n_markers = image_files.size();
  }
  if (n_markers != image_files.size())
    return Error::InvalidArgument("the prompt has " + std::to_string(n_markers) + " <__media__> markers for " +
                                  std::to_string(image_files.size()) + " images");
  const std::vector<int32_t> begin = encode("<|vision_start|>"), end = encode("<|vision_end|>");
  if (begin.size() != 1 || end.size() != 1)
    return Error::InvalidArgument("the model's vocabulary has no <|vision_start|> / <|vision_end|> tokens");
  RunImagePrompt out;
  size_t from = 0;
  for (size_t i = 0; i < image_files.size(); ++i) {
    const size_t at = text.find(marker, from);
    const std::vector<int32_t> seg = encode(text.substr(from, at - from));
    out.tokens.insert(out.tokens.end(), seg.begin(), seg.end());
    out.tokens.push_back(begin[0]);
    REWIND_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(image_files[i]));
    auto enc = pipeline.Encode(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
    if (!enc) return Error::InvalidArgument(image_files[i] + ": " + enc.error().message);
    const vision::ImageEmbedding& e = *enc->embedding;
    out.spans.push_back({static_cast<int32_t>(out.tokens.size()), e.nx, e.ny, e.rows.data()});
    const std::vector<int32_t> ids = vision::ImageTokenIds(enc->key, e.n_tokens());
    out.tokens.insert(out.tokens.end(), ids.begin(), ids.end());
    out.tokens.push_back(end[0]);
    out.embeddings.push_back(enc->embedding);
    out.encode_ms += enc->encode_ms;
    from = at + marker.size();
  }
  const std::vector<int32_t> tail = encode(text.substr(from));
  out.tokens.insert(out.tokens.end(), tail.begin(), tail.end());
  return out;
}

}  // namespace rw::apps
