#include "vision/preprocess.h"

#include <algorithm>
#include <cmath>

namespace rw::vision {

ImageSize SmartResizeTarget(ImageSize in, int32_t align, int64_t min_pixels, int64_t max_pixels) {
  const int w = in.width, h = in.height;
  if (w <= 0 || h <= 0 || align <= 0) return {0, 0};
  const float f = static_cast<float>(align);
  auto round_by = [&](float x) { return static_cast<int>(std::round(x / f)) * align; };
  auto ceil_by = [&](float x) { return static_cast<int>(std::ceil(x / f)) * align; };
  auto floor_by = [&](float x) { return static_cast<int>(std::floor(x / f)) * align; };
  int w_bar = std::max(align, round_by(static_cast<float>(w)));
  int h_bar = std::max(align, round_by(static_cast<float>(h)));
  if (max_pixels > 0 && static_cast<int64_t>(h_bar) * w_bar > max_pixels) {
    const float beta = std::sqrt(static_cast<float>(h) * w / static_cast<float>(max_pixels));
    h_bar = std::max(align, floor_by(h / beta));
    w_bar = std::max(align, floor_by(w / beta));
  } else if (min_pixels > 0 && static_cast<int64_t>(h_bar) * w_bar < min_pixels) {
    const float beta = std::sqrt(static_cast<float>(min_pixels) / (static_cast<float>(h) * w));
    h_bar = ceil_by(h * beta);
    w_bar = ceil_by(w * beta);
  }
  return {w_bar, h_bar};
}

namespace {

constexpr int kPrecisionBits = 32 - 8 - 2;

double BicubicFilter(double x) {
  constexpr double a = -0.5;
  if (x < 0.0) x = -x;
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

// Per output pixel: the first input index, the count and ksize fixed-point weights.
struct Taps {
  int ksize = 0;
  std::vector<int> first, count;  // [out]
  std::vector<int32_t> w;         // [out][ksize]
};

Taps ComputeTaps(int in_size, int out_size) {
  Taps t;
  const double scale = static_cast<double>(in_size) / out_size;
  const double filterscale = std::max(1.0, scale);
  const double support = 2.0 * filterscale;
  t.ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  t.first.resize(out_size);
  t.count.resize(out_size);
  t.w.assign(static_cast<size_t>(out_size) * t.ksize, 0);
  std::vector<double> pw(t.ksize);
  const double fxp = std::ldexp(1.0, kPrecisionBits);
  for (int o = 0; o < out_size; ++o) {
    const double center = (o + 0.5) * scale;
    const double ss = 1.0 / filterscale;
    int lo = static_cast<int>(center - support + 0.5);
    if (lo < 0) lo = 0;
    int hi = static_cast<int>(center + support + 0.5);
    if (hi > in_size) hi = in_size;
    const int n = hi - lo;
    double sum = 0.0;
    for (int k = 0; k < n; ++k) {
      pw[k] = BicubicFilter((k + lo - center + 0.5) * ss);
      sum += pw[k];
    }
    for (int k = 0; k < t.ksize; ++k) {
      double v = k < n ? (sum != 0.0 ? pw[k] / sum : pw[k]) : 0.0;
      t.w[static_cast<size_t>(o) * t.ksize + k] = static_cast<int32_t>(v * fxp + (v < 0 ? -0.5 : 0.5));
    }
    t.first[o] = lo;
    t.count[o] = n;
  }
  return t;
}

uint8_t Clip8(int32_t v) { return static_cast<uint8_t>(v < 0 ? 0 : v > 255 ? 255 : v); }

// Resamples along x (rows kept): src [h][in_w][3] -> [h][out_w][3].
std::vector<uint8_t> Horizontal(const uint8_t* src, int in_w, int h, int out_w, const Taps& t) {
  std::vector<uint8_t> out(static_cast<size_t>(out_w) * h * 3);
  for (int y = 0; y < h; ++y) {
    const uint8_t* row = src + static_cast<size_t>(y) * in_w * 3;
    uint8_t* dst = out.data() + static_cast<size_t>(y) * out_w * 3;
    for (int o = 0; o < out_w; ++o) {
      const int32_t* k = &t.w[static_cast<size_t>(o) * t.ksize];
      const uint8_t* p = row + static_cast<size_t>(t.first[o]) * 3;
      int32_t s0 = 1 << (kPrecisionBits - 1), s1 = s0, s2 = s0;
      for (int j = 0; j < t.count[o]; ++j, p += 3) {
        s0 += p[0] * k[j];
        s1 += p[1] * k[j];
        s2 += p[2] * k[j];
      }
      dst[o * 3 + 0] = Clip8(s0 >> kPrecisionBits);
      dst[o * 3 + 1] = Clip8(s1 >> kPrecisionBits);
      dst[o * 3 + 2] = Clip8(s2 >> kPrecisionBits);
    }
  }
  return out;
}

// Resamples along y: src [in_h][w][3] -> [out_h][w][3].
std::vector<uint8_t> Vertical(const uint8_t* src, int w, int out_h, const Taps& t) {
  const size_t row = static_cast<size_t>(w) * 3;
  std::vector<uint8_t> out(row * out_h);
  std::vector<int32_t> acc(row);
  for (int o = 0; o < out_h; ++o) {
    std::fill(acc.begin(), acc.end(), 1 << (kPrecisionBits - 1));
    const int32_t* k = &t.w[static_cast<size_t>(o) * t.ksize];
    for (int j = 0; j < t.count[o]; ++j) {
      const uint8_t* s = src + static_cast<size_t>(t.first[o] + j) * row;
      for (size_t i = 0; i < row; ++i) acc[i] += s[i] * k[j];
    }
    for (size_t i = 0; i < row; ++i) out[static_cast<size_t>(o) * row + i] = Clip8(acc[i] >> kPrecisionBits);
  }
  return out;
}

}  // namespace

RgbImage ResampleBicubic(const RgbImage& src, int32_t width, int32_t height) {
  RgbImage out;
  out.width = width;
  out.height = height;
  const bool hz = width != src.width, vt = height != src.height;
  if (hz && vt) {
    auto tmp = Horizontal(src.rgb.data(), src.width, src.height, width, ComputeTaps(src.width, width));
    out.rgb = Vertical(tmp.data(), width, height, ComputeTaps(src.height, height));
  } else if (hz) {
    out.rgb = Horizontal(src.rgb.data(), src.width, src.height, width, ComputeTaps(src.width, width));
  } else if (vt) {
    out.rgb = Vertical(src.rgb.data(), src.width, height, ComputeTaps(src.height, height));
  } else {
    out.rgb = src.rgb;
  }
  return out;
}

RgbImage ResizePadded(const RgbImage& src, ImageSize target) {
  if (src.width == target.width && src.height == target.height) {
    RgbImage copy;
    copy.width = src.width;
    copy.height = src.height;
    copy.rgb = src.rgb;
    return copy;
  }
  const float sw = static_cast<float>(target.width) / src.width;
  const float sh = static_cast<float>(target.height) / src.height;
  const float scale = std::min(sw, sh);
  const int nw = std::min(static_cast<int>(std::ceil(src.width * scale)), target.width);
  const int nh = std::min(static_cast<int>(std::ceil(src.height * scale)), target.height);
  const RgbImage resized = ResampleBicubic(src, nw, nh);
  RgbImage out;
  out.width = target.width;
  out.height = target.height;
  out.rgb.assign(static_cast<size_t>(target.width) * target.height * 3, 0);
  const int ox = (target.width - nw) / 2, oy = (target.height - nh) / 2;
  for (int y = 0; y < nh; ++y)
    std::copy_n(resized.rgb.data() + static_cast<size_t>(y) * nw * 3, static_cast<size_t>(nw) * 3,
                out.rgb.data() + (static_cast<size_t>(y + oy) * target.width + ox) * 3);
  return out;
}

std::vector<float> NormalisePlanar(const RgbImage& img, const std::array<float, 3>& mean,
                                   const std::array<float, 3>& std) {
  const size_t n = static_cast<size_t>(img.width) * img.height;
  std::vector<float> out(3 * n);
  for (size_t i = 0; i < n; ++i)
    for (int c = 0; c < 3; ++c) out[c * n + i] = (static_cast<float>(img.rgb[i * 3 + c]) / 255.0f - mean[c]) / std[c];
  return out;
}

}  // namespace rw::vision
