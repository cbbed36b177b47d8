// Decoding of user images (PNG, JPEG) into 8-bit RGB with Debian's stb_image (libstb-dev), under limits checked
// before any pixel is allocated. Every failure is an input error (kInvalidArgument / kOutOfRange) with a message
// a client can act on; nothing here aborts on bad bytes.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/expected.h"

namespace rw::vision {

// An 8-bit RGB image, rows top to bottom, pixels left to right, [height][width][3].
struct RgbImage {
  int32_t width = 0;
  int32_t height = 0;
  std::vector<uint8_t> rgb;  // [height][width][3]
};

struct ImageLimits {
  int64_t max_bytes = int64_t{20} << 20;   // encoded bytes of one image
  int64_t max_pixels = int64_t{40} << 20;  // width * height of one image (before the resize)
  int32_t max_images = 16;                 // images in one request
};

// "png" or "jpeg" from the first bytes, "" when neither (the format is decided by content, never by a name).
std::string SniffImageFormat(std::span<const uint8_t> bytes);

// Decodes a PNG or JPEG. Errors: empty, too large (bytes or pixels), another format (named when recognisable:
// GIF, WebP, BMP...), broken or truncated data.
Expected<RgbImage> DecodeImage(std::span<const uint8_t> bytes, const ImageLimits& limits);

// The bytes of a base64 string (standard alphabet, padding optional, whitespace ignored); an error names the
// first bad character's offset.
Expected<std::vector<uint8_t>> DecodeBase64(std::string_view text, int64_t max_bytes);

}  // namespace rw::vision
