#include "kernels/rope.h"

#include <algorithm>
#include <cmath>

namespace rw::kernels {
namespace {

float YarnCorrDim(int n_dims, int n_ctx_orig, float n_rot, float base) {
  return n_dims * std::log(n_ctx_orig / (n_rot * 2.0f * static_cast<float>(M_PI))) / (2.0f * std::log(base));
}

}  // namespace

void RopeCache(const RopeParams& p, int32_t pos, float* out) { RopeCacheMulti(p, {pos, pos, pos, 0}, out); }

void RopeCacheMulti(const RopeParams& p, const std::array<int32_t, 4>& pos, float* out) {
  const int n = p.n_rot;
  const float theta_scale = std::pow(p.freq_base, -2.0f / static_cast<float>(n));
  float ext_factor = 0.0f, corr0 = 0.0f, corr1 = 0.0f, mscale = 1.0f;
  if (p.yarn) {
    ext_factor = 1.0f;
    corr0 = std::max(0.0f, std::floor(YarnCorrDim(n, p.n_ctx_orig, 32.0f, p.freq_base)));
    corr1 = std::min(static_cast<float>(n - 1), std::ceil(YarnCorrDim(n, p.n_ctx_orig, 1.0f, p.freq_base)));
    mscale = p.yarn_attn_factor * (1.0f + 0.1f * std::log(1.0f / p.freq_scale));
  }
  const int sect_dims = p.sections[0] + p.sections[1] + p.sections[2] + p.sections[3];
  float theta_t = static_cast<float>(pos[0]), theta_h = static_cast<float>(pos[1]);
  float theta_w = static_cast<float>(pos[2]), theta_e = static_cast<float>(pos[3]);
  for (int i0 = 0; i0 < n; i0 += 2) {
    float theta_extrap = theta_t;
    if (p.imrope && sect_dims > 0) {
      const int sector = (i0 / 2) % sect_dims;
      if (sector % 3 == 1 && sector < 3 * p.sections[1]) {
        theta_extrap = theta_h;
      } else if (sector % 3 == 2 && sector < 3 * p.sections[2]) {
        theta_extrap = theta_w;
      } else if (sector % 3 == 0 && sector < 3 * p.sections[0]) {
        theta_extrap = theta_t;
      } else {
        theta_extrap = theta_e;
      }
    }
    const float theta_interp = p.freq_scale * theta_extrap;
    float theta = theta_interp;
    if (ext_factor != 0.0f) {
      const float y = (static_cast<float>(i0 / 2) - corr0) / std::max(0.001f, corr1 - corr0);
      const float ramp = (1.0f - std::min(1.0f, std::max(0.0f, y))) * ext_factor;
      theta = theta_interp * (1.0f - ramp) + theta_extrap * ramp;
    }
    out[i0] = std::cos(theta) * mscale;
    out[i0 + 1] = std::sin(theta) * mscale;
    theta_t *= theta_scale;
    theta_h *= theta_scale;
    theta_w *= theta_scale;
    theta_e *= theta_scale;
  }
}

void RopeApply(const float* cache, int32_t n_rot, float* x) {
  const int half = n_rot / 2;
  for (int i = 0; i < half; ++i) {
    const float c = cache[2 * i], s = cache[2 * i + 1];
    const float x0 = x[i], x1 = x[i + half];
    x[i] = x0 * c - x1 * s;
    x[i + half] = x0 * s + x1 * c;
  }
}

void RopeApplyAdjacent(const float* cache, int32_t n_rot, float* x) {
  for (int i = 0; i < n_rot / 2; ++i) {
    const float c = cache[2 * i], s = cache[2 * i + 1];
    const float x0 = x[2 * i], x1 = x[2 * i + 1];
    x[2 * i] = x0 * c - x1 * s;
    x[2 * i + 1] = x0 * s + x1 * c;
  }
}

}  // namespace rw::kernels
