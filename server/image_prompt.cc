#include "server/image_prompt.h"

#include <algorithm>

#include "vision/image_pipeline.h"

namespace rw::server {

ParseResult<std::vector<uint8_t>> ImageBytesFromUrl(const std::string& url, int64_t max_bytes) {
  auto starts = [&](const char* p) { return url.rfind(p, 0) == 0; };
  if (starts("http://") || starts("https://"))
    return ApiError::BadRequest("remote image URLs are not fetched by this server (it makes no network requests); "
                                "send the image inline as a data: URI (data:image/png;base64,...)",
                                "image_url");
  if (!starts("data:"))
    return ApiError::BadRequest("an image URL must be a data: URI (data:image/png;base64,...)", "image_url");
  const size_t comma = url.find(',');
  if (comma == std::string::npos) return ApiError::BadRequest("the image data: URI has no ',' before its data", "image_url");
  const std::string header = url.substr(5, comma - 5);
  if (header.size() < 7 || header.compare(header.size() - 7, 7, ";base64") != 0)
    return ApiError::BadRequest("the image data: URI must be base64 (data:<type>;base64,...)", "image_url");
  auto bytes = vision::DecodeBase64(std::string_view(url).substr(comma + 1), max_bytes);
  if (!bytes) return ApiError::BadRequest(bytes.error().message, "image_url");
  return std::move(bytes).value();
}

std::vector<std::string> ChatImageUrls(const nlohmann::ordered_json& messages) {
  std::vector<std::string> urls;
  if (!messages.is_array()) return urls;
  for (const auto& m : messages) {
    if (!m.is_object() || !m.contains("content") || !m["content"].is_array()) continue;
    for (const auto& part : m["content"])
      if (part.is_object() && part.value("type", "") == "image" && part.contains("image_url"))
        urls.push_back(part["image_url"].value("url", ""));
  }
  return urls;
}

std::optional<ApiError> ExpandChatImages(const nlohmann::ordered_json& messages, const TextCodec& codec,
                                         vision::ImagePipeline* pipeline, PreparedGeneration* p) {
  const std::vector<std::string> urls = ChatImageUrls(messages);
  if (urls.empty()) return std::nullopt;
  if (pipeline == nullptr)
    return ApiError::BadRequest("this server takes no images: start it with --mmproj FILE (qwen35 / qwen35moe "
                                "models with their qwen3vl_merger projector)",
                                "messages");
  const vision::PipelineOptions& opt = pipeline->options();
  if (static_cast<int64_t>(urls.size()) > opt.limits.max_images)
    return ApiError::BadRequest("the request has " + std::to_string(urls.size()) + " images, more than the limit of " +
                                    std::to_string(opt.limits.max_images) + " (--image-max-count)",
                                "messages");
  const std::vector<int32_t> pad = codec.Encode("<|image_pad|>", /*parse_special=*/true, /*add_special=*/false);
  if (pad.size() != 1)
    return ApiError::BadRequest("the model's vocabulary has no <|image_pad|> token: it cannot take images", "messages");
  std::vector<size_t> at;  // positions of the placeholders
  for (size_t i = 0; i < p->prompt.size(); ++i)
    if (p->prompt[i] == pad[0]) at.push_back(i);
  if (at.size() != urls.size())
    return ApiError::BadRequest("the chat template rendered " + std::to_string(at.size()) +
                                    " image placeholders (<|image_pad|>) for " + std::to_string(urls.size()) +
                                    " images",
                                "messages");
  std::vector<vision::EncodedImage> encoded;
  for (size_t i = 0; i < urls.size(); ++i) {
    auto bytes = ImageBytesFromUrl(urls[i], opt.limits.max_bytes);
    if (auto* e = std::get_if<ApiError>(&bytes)) {
      e->message = "image " + std::to_string(i) + ": " + e->message;
      return *e;
    }
    auto enc = pipeline->Encode(std::get<std::vector<uint8_t>>(bytes));
    if (!enc) return ApiError::BadRequest("image " + std::to_string(i) + ": " + enc.error().message, "messages");
    encoded.push_back(std::move(enc).value());
  }
  // Expand: the i-th placeholder becomes the image's nx·ny ids; a position after it moves by nx·ny - 1.
  std::vector<int32_t> prompt;
  std::vector<int32_t> shift_at, shift_by;  // old position of each placeholder, cumulative shift after it
  int32_t shift = 0;
  size_t next = 0;
  for (size_t i = 0; i < p->prompt.size(); ++i) {
    if (next < at.size() && i == at[next]) {
      const auto& e = *encoded[next].embedding;
      engine::PromptImage img;
      img.start = static_cast<int32_t>(prompt.size());
      img.nx = e.nx;
      img.ny = e.ny;
      img.rows = std::shared_ptr<const std::vector<float>>(encoded[next].embedding, &encoded[next].embedding->rows);
      const std::vector<int32_t> ids = vision::ImageTokenIds(encoded[next].key, e.n_tokens());
      prompt.insert(prompt.end(), ids.begin(), ids.end());
      p->images.push_back(std::move(img));
      shift += e.n_tokens() - 1;
      shift_at.push_back(static_cast<int32_t>(i));
      shift_by.push_back(shift);
      ++next;
    } else {
      prompt.push_back(p->prompt[i]);
    }
  }
  auto moved = [&](int32_t pos) {
    // Shift of the placeholders strictly before pos (a hint at a placeholder stays at the image's start).
    auto it = std::lower_bound(shift_at.begin(), shift_at.end(), pos);
    return it == shift_at.begin() ? pos : pos + shift_by[static_cast<size_t>(it - shift_at.begin()) - 1];
  };
  for (int32_t& h : p->checkpoint_hints) h = moved(h);
  if (p->generation_start >= 0) p->generation_start = moved(p->generation_start);
  p->prompt = std::move(prompt);
  return std::nullopt;
}

}  // namespace rw::server
