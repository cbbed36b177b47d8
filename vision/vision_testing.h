// Test helpers: synthetic images and their PNG / JPEG bytes (stb_image_write from libstb-dev).
#pragma once

#include <cstdint>
#include <vector>

#include <stb/stb_image_write.h>

#include "vision/image_decode.h"

namespace rw::vision::testing {

// A deterministic colourful pattern w x h.
inline RgbImage Pattern(int32_t w, int32_t h, uint32_t seed = 1) {
  RgbImage img;
  img.width = w;
  img.height = h;
  img.rgb.resize(static_cast<size_t>(w) * h * 3);
  uint32_t s = seed * 2654435761u + 12345u;
  for (int32_t y = 0; y < h; ++y)
    for (int32_t x = 0; x < w; ++x) {
      s = s * 1664525u + 1013904223u;
      uint8_t* p = &img.rgb[(static_cast<size_t>(y) * w + x) * 3];
      p[0] = static_cast<uint8_t>((x * 255) / std::max(1, w - 1));
      p[1] = static_cast<uint8_t>((y * 255) / std::max(1, h - 1));
      p[2] = static_cast<uint8_t>((s >> 24) & 0xFF);
    }
  return img;
}

inline void AppendBytes(void* ctx, void* data, int size) {
  auto* out = static_cast<std::vector<uint8_t>*>(ctx);
  out->insert(out->end(), static_cast<uint8_t*>(data), static_cast<uint8_t*>(data) + size);
}

inline std::vector<uint8_t> EncodePng(const RgbImage& img) {
  std::vector<uint8_t> out;
  stbi_write_png_to_func(AppendBytes, &out, img.width, img.height, 3, img.rgb.data(), img.width * 3);
  return out;
}

inline std::vector<uint8_t> EncodeJpeg(const RgbImage& img, int quality = 90) {
  std::vector<uint8_t> out;
  stbi_write_jpg_to_func(AppendBytes, &out, img.width, img.height, 3, img.rgb.data(), quality);
  return out;
}

}  // namespace rw::vision::testing
