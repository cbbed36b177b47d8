#include "vision/image_decode.h"

#include <cstring>
#include <memory>

#include <stb/stb_image.h>

namespace rw::vision {

namespace {

bool StartsWith(std::span<const uint8_t> b, std::initializer_list<uint8_t> magic) {
  if (b.size() < magic.size()) return false;
  size_t i = 0;
  for (uint8_t m : magic)
    if (b[i++] != m) return false;
  return true;
}

// Names formats we recognise but do not decode, for a clear refusal.
std::string OtherFormat(std::span<const uint8_t> b) {
  if (StartsWith(b, {'G', 'I', 'F', '8'})) return "GIF";
  if (b.size() >= 12 && StartsWith(b, {'R', 'I', 'F', 'F'}) && std::memcmp(b.data() + 8, "WEBP", 4) == 0) return "WebP";
  if (StartsWith(b, {'B', 'M'})) return "BMP";
  if (StartsWith(b, {'I', 'I', 42, 0}) || StartsWith(b, {'M', 'M', 0, 42})) return "TIFF";
  if (b.size() >= 12 && std::memcmp(b.data() + 4, "ftyp", 4) == 0) return "HEIF/AVIF";
  if (StartsWith(b, {'<'}) || StartsWith(b, {0xEF, 0xBB, 0xBF})) return "text (SVG/HTML?)";
  return "";
}

// A JPEG ends with the EOI marker FF D9 (trailing padding bytes tolerated). stb_image decodes a truncated JPEG
// without complaint, filling the missing rows with grey; we refuse it instead.
bool JpegHasEnd(std::span<const uint8_t> b) {
  size_t n = b.size();
  size_t scanned = 0;
  while (n >= 2 && scanned < 4096) {
    if (b[n - 2] == 0xFF && b[n - 1] == 0xD9) return true;
    --n;
    ++scanned;
  }
  return false;
}

}  // namespace

std::string SniffImageFormat(std::span<const uint8_t> b) {
  if (StartsWith(b, {0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A})) return "png";
  if (StartsWith(b, {0xFF, 0xD8, 0xFF})) return "jpeg";
  return "";
}

Expected<RgbImage> DecodeImage(std::span<const uint8_t> bytes, const ImageLimits& limits) {
  if (bytes.empty()) return Error::InvalidArgument("the image is empty (0 bytes)");
  if (static_cast<int64_t>(bytes.size()) > limits.max_bytes)
    return Error::OutOfRange("the image has " + std::to_string(bytes.size()) + " bytes, more than the limit of " +
                             std::to_string(limits.max_bytes) + " (--image-max-bytes)");
  if (bytes.size() > static_cast<size_t>(INT32_MAX)) return Error::OutOfRange("the image is too large");
  const std::string format = SniffImageFormat(bytes);
  if (format.empty()) {
    const std::string other = OtherFormat(bytes);
    return Error::InvalidArgument(other.empty() ? "the image is neither PNG nor JPEG (unrecognised bytes)"
                                                : "the image is " + other + ": only PNG and JPEG are supported");
  }
  if (format == "jpeg" && !JpegHasEnd(bytes))
    return Error::InvalidArgument("the JPEG image is truncated (no end-of-image marker)");
  const int len = static_cast<int>(bytes.size());
  int w = 0, h = 0, comp = 0;
  if (!stbi_info_from_memory(bytes.data(), len, &w, &h, &comp))
    return Error::InvalidArgument("the " + format + " image is broken: " + stbi_failure_reason());
  if (w <= 0 || h <= 0) return Error::InvalidArgument("the " + format + " image has no pixels");
  if (static_cast<int64_t>(w) * h > limits.max_pixels)
    return Error::OutOfRange("the image is " + std::to_string(w) + "x" + std::to_string(h) + " = " +
                             std::to_string(static_cast<int64_t>(w) * h) + " pixels, more than the limit of " +
                             std::to_string(limits.max_pixels) + " (--image-max-pixels)");
  std::unique_ptr<uint8_t, void (*)(void*)> px(stbi_load_from_memory(bytes.data(), len, &w, &h, &comp, 3),
                                               stbi_image_free);
  if (!px) return Error::InvalidArgument("the " + format + " image is broken or truncated: " + stbi_failure_reason());
  RgbImage img;
  img.width = w;
  img.height = h;
  img.rgb.assign(px.get(), px.get() + static_cast<size_t>(w) * h * 3);
  return img;
}

Expected<std::vector<uint8_t>> DecodeBase64(std::string_view text, int64_t max_bytes) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+' || c == '-') return 62;  // '-' and '_': the URL-safe alphabet
    if (c == '/' || c == '_') return 63;
    return -1;
  };
  if (static_cast<int64_t>(text.size()) / 4 * 3 > max_bytes + 3)
    return Error::OutOfRange("the base64 image data decodes to more than the limit of " + std::to_string(max_bytes) +
                             " bytes (--image-max-bytes)");
  std::vector<uint8_t> out;
  out.reserve(text.size() / 4 * 3 + 3);
  uint32_t acc = 0;
  int bits = 0;
  bool padding = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
    if (c == '=') {
      padding = true;
      continue;
    }
    const int v = value(c);
    if (v < 0 || padding)
      return Error::InvalidArgument("invalid base64 image data at offset " + std::to_string(i));
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<uint8_t>((acc >> bits) & 0xFF));
    }
  }
  if (static_cast<int64_t>(out.size()) > max_bytes)
    return Error::OutOfRange("the image has " + std::to_string(out.size()) + " bytes, more than the limit of " +
                             std::to_string(max_bytes) + " (--image-max-bytes)");
  return out;
}

}  // namespace rw::vision
