// Images in chat requests (docs/images.md): the image parts that request_parse normalised ({type: image,
// image_url: {url}}) are decoded from their data: URIs, encoded by the vision pipeline (or found in its cache),
// and each <|image_pad|> token the chat template rendered is replaced by the image's placeholder ids; checkpoint
// hints and the generation start move with the expansion. Remote URLs are refused: the server fetches nothing.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "server/api_error.h"
#include "server/backend.h"
#include "server/request_parse.h"
#include "server/server_impl.h"

namespace rw::vision {
class ImagePipeline;
}

namespace rw::server {

// The bytes of a data: URI (base64 only). Errors: remote URLs (not fetched), other schemes, bad base64, too big.
ParseResult<std::vector<uint8_t>> ImageBytesFromUrl(const std::string& url, int64_t max_bytes);

// The image URLs of a chat request's messages, in message and part order (what the template renders).
std::vector<std::string> ChatImageUrls(const nlohmann::ordered_json& messages);

// Expands p->prompt (tokens of the rendered chat) with the images; no-op without image parts. Errors (400): no
// --mmproj, too many images, an undecodable image, a template that did not render one placeholder per image.
std::optional<ApiError> ExpandChatImages(const nlohmann::ordered_json& messages, const TextCodec& codec,
                                         vision::ImagePipeline* pipeline, PreparedGeneration* p);

}  // namespace rw::server
