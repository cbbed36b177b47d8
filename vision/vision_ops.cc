#include "vision/vision_ops.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "kernels/f16.h"
#include "kernels/f16_row.h"

namespace rw::vision {

void LayerNormRow(const float* x, const float* w, const float* b, int64_t n, float eps, float* out) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]);
  const float mean = static_cast<float>(sum) / static_cast<float>(n);
  double sq = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const float d = x[i] - mean;
    out[i] = d;
    sq += static_cast<double>(d * d);
  }
  const float var = static_cast<float>(sq / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(var + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = out[i] * scale;
  for (int64_t i = 0; i < n; ++i) out[i] = out[i] * w[i];
  for (int64_t i = 0; i < n; ++i) out[i] = out[i] + b[i];
}

namespace {

const std::array<uint16_t, 65536>& GeluTable() {
  static const std::array<uint16_t, 65536> table = [] {
    std::array<uint16_t, 65536> t{};
    constexpr float kA = 0.044715f, kS = 0.79788456080286535587989211986876f;
    for (uint32_t i = 0; i < 65536; ++i) {
      const float x = kernels::HalfToFloat(static_cast<uint16_t>(i));
      t[i] = kernels::FloatToHalf(0.5f * x * (1.0f + std::tanh(kS * x * (1.0f + kA * x * x))));
    }
    return t;
  }();
  return table;
}

}  // namespace

void GeluRow(float* x, int64_t n) {
  const auto& t = GeluTable();
  thread_local std::vector<uint16_t> h;
  thread_local std::vector<float> g;
  h.resize(static_cast<size_t>(n));
  g.resize(static_cast<size_t>(n));
  kernels::FloatToHalfRow(x, h.data(), n);  // the scalar conversions' bits, F16C where the CPU has it
  for (int64_t i = 0; i < n; ++i) h[i] = t[h[i]];
  kernels::HalfToFloatRow(h.data(), g.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    if (x[i] <= -10.0f) x[i] = 0.0f;
    else if (x[i] < 10.0f) x[i] = g[i];
  }
}

void VisionRopeCache(int32_t row, int32_t col, int32_t d, float* out) {
  const int n_dims = d / 2;
  const float theta_scale = std::pow(10000.0f, -2.0f / static_cast<float>(n_dims));
  float theta_t = static_cast<float>(row), theta_h = static_cast<float>(col);
  const int quarter = d / 4;
  for (int i0 = 0; i0 < d; i0 += 2) {
    const int sector = i0 / 2;
    if (sector == quarter) theta_h = static_cast<float>(col);
    const float theta = sector < quarter ? theta_t : theta_h;
    out[i0] = std::cos(theta);
    out[i0 + 1] = std::sin(theta);
    theta_t *= theta_scale;
    theta_h *= theta_scale;
  }
}

std::vector<float> ResizePositions(const std::vector<float>& table, int32_t side, int32_t E, int32_t w, int32_t h) {
  std::vector<float> out(static_cast<size_t>(w) * h * E);
  if (w == side && h == side) return table;
  float sf0 = static_cast<float>(w) / side, sf1 = static_cast<float>(h) / side;
  if (w > 1 && side > 1) sf0 = static_cast<float>(w - 1) / (side - 1);
  if (h > 1 && side > 1) sf1 = static_cast<float>(h - 1) / (side - 1);
  for (int32_t i1 = 0; i1 < h; ++i1) {
    const float y = static_cast<float>(i1) / sf1;
    int64_t y0 = static_cast<int64_t>(std::floor(y)), y1 = y0 + 1;
    y0 = std::clamp<int64_t>(y0, 0, side - 1);
    y1 = std::clamp<int64_t>(y1, 0, side - 1);
    const float dy = std::clamp(y - static_cast<float>(y0), 0.0f, 1.0f);
    for (int32_t i0 = 0; i0 < w; ++i0) {
      const float x = static_cast<float>(i0) / sf0;
      int64_t x0 = static_cast<int64_t>(std::floor(x)), x1 = x0 + 1;
      x0 = std::clamp<int64_t>(x0, 0, side - 1);
      x1 = std::clamp<int64_t>(x1, 0, side - 1);
      const float dx = std::clamp(x - static_cast<float>(x0), 0.0f, 1.0f);
      const float* a = &table[(y0 * side + x0) * E];
      const float* b = &table[(y0 * side + x1) * E];
      const float* c = &table[(y1 * side + x0) * E];
      const float* e = &table[(y1 * side + x1) * E];
      float* o = &out[(static_cast<size_t>(i1) * w + i0) * E];
      for (int32_t k = 0; k < E; ++k)
        o[k] = a[k] * (1 - dx) * (1 - dy) + b[k] * dx * (1 - dy) + c[k] * (1 - dx) * dy + e[k] * dx * dy;
    }
  }
  return out;
}

}  // namespace rw::vision
