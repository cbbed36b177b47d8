#include "engine/engine_images.h"

#include <algorithm>
#include <string>

#include "base/check.h"

namespace rw::engine {

Status ValidatePromptImages(const GenerationRequest& r, const EngineInfo& info) {
  const int64_t n = static_cast<int64_t>(r.prompt.size());
  if (!r.images.empty() && !info.images)
    return Error::InvalidArgument("this model (" + info.arch +
                                  ") does not take images: only qwen35 / qwen35moe with --mmproj do");
  int64_t prev_end = 0;
  size_t k = 0;
  for (const PromptImage& im : r.images) {
    const std::string where = "image " + std::to_string(k++) + ": ";
    if (im.nx <= 0 || im.ny <= 0 || !im.rows) return Error::InvalidArgument(where + "no token grid or rows");
    const int64_t end = static_cast<int64_t>(im.start) + int64_t{im.nx} * im.ny;
    if (im.start < prev_end || end > n) return Error::InvalidArgument(where + "span outside the prompt or overlapping");
    if (im.rows->size() != static_cast<size_t>(int64_t{im.nx} * im.ny * info.n_embd))
      return Error::InvalidArgument(where + "embedding rows do not match the model's embedding length " +
                                    std::to_string(info.n_embd));
    prev_end = end;
  }
  size_t next = 0;
  for (int64_t p = 0; p < n; ++p) {
    while (next < r.images.size() && p >= r.images[next].start + int64_t{r.images[next].nx} * r.images[next].ny) ++next;
    const bool in_image = next < r.images.size() && p >= r.images[next].start;
    const int32_t t = r.prompt[p];
    if (!in_image && (t < 0 || t >= info.n_vocab))
      return Error::InvalidArgument("token id " + std::to_string(t) + " is outside the vocabulary [0, " +
                                    std::to_string(info.n_vocab) + ")");
  }
  return Status::Ok();
}

model::SeqImages MakeSeqImages(const std::vector<PromptImage>& images) {
  std::vector<model::ImageSpan> spans;
  for (const PromptImage& im : images) spans.push_back({im.start, im.nx, im.ny, im.rows->data()});
  auto s = model::SeqImages::Make(std::move(spans));
  REWIND_CHECK_MSG(s.ok(), "validated images rejected: %s", s.error().message.c_str());
  return std::move(s).value();
}

void AddImageCheckpointHints(GenerationRequest& r) {
  const int32_t n = static_cast<int32_t>(r.prompt.size());
  for (const PromptImage& im : r.images) {
    const int32_t after = im.start + im.nx * im.ny + 1;  // past <|vision_end|>
    if (im.start > 0 && im.start < n) r.checkpoint_hints.push_back(im.start);
    if (after < n) r.checkpoint_hints.push_back(after);
  }
  std::sort(r.checkpoint_hints.begin(), r.checkpoint_hints.end());
  r.checkpoint_hints.erase(std::unique(r.checkpoint_hints.begin(), r.checkpoint_hints.end()), r.checkpoint_hints.end());
}

std::vector<int32_t> TextTokens(std::span<const int32_t> prompt, int32_t n_vocab) {
  std::vector<int32_t> out;
  out.reserve(prompt.size());
  for (int32_t t : prompt)
    if (t >= 0 && t < n_vocab) out.push_back(t);
  return out;
}

}  // namespace rw::engine
