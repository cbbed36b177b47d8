// Image preprocessing of llama.cpp v0.5.0's mtmd for the Qwen-VL projectors (mtmd_image_preprocessor_dyn_size):
// the "smart resize" target size, a Pillow-compatible bicubic resample (fixed point, a = -0.5), the resize that
// keeps the aspect ratio and pads the rest black, centred (PAD_CEIL), and normalisation with the mmproj's mean and
// std. Re-implemented from the behaviour (docs/images.md); the tests pin the arithmetic.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "vision/image_decode.h"

namespace rw::vision {

struct ImageSize {
  int32_t width = 0;
  int32_t height = 0;
  bool operator==(const ImageSize&) const = default;
};

// llama.cpp's calc_size_preserved_ratio without longest_edge: round each side to a multiple of `align` (at least
// align), then, when the area exceeds max_pixels, scale down (floor to the multiple), else when it is below
// min_pixels, scale up (ceil to the multiple). Float arithmetic as llama.cpp's.
ImageSize SmartResizeTarget(ImageSize in, int32_t align, int64_t min_pixels, int64_t max_pixels);

// Pillow's separable bicubic resample (support 2, a = -0.5, 22-bit fixed-point weights, horizontal pass first).
RgbImage ResampleBicubic(const RgbImage& src, int32_t width, int32_t height);

// Resize into `target` keeping the aspect ratio: the image is scaled by min(tw/w, th/h), each side rounded up
// (and clamped to the target), resampled, and composited centred on black (offsets (t - new) / 2). Same size:
// a copy.
RgbImage ResizePadded(const RgbImage& src, ImageSize target);

// [3][H][W] planar floats: (u8 / 255 - mean[c]) / std[c].
std::vector<float> NormalisePlanar(const RgbImage& img, const std::array<float, 3>& mean,
                                   const std::array<float, 3>& std);

}  // namespace rw::vision
