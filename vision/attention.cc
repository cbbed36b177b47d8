#include "vision/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "base/check.h"
#include "base/cpu_features.h"
#include "kernels/exp_approx.h"
#include "vision/attention_block.h"

namespace rw::vision {
namespace attn {
namespace {

// The scalar twin: plain loops with std::fma, the header's operations one element at a time.
struct ScalarKernels {
  static void Scores(const float* const* q, int32_t rows, const float* kt, int32_t k0, int32_t k1, int32_t D,
                     float scale, float* s, int32_t s_stride) {
    for (int32_t r = 0; r < rows; ++r)
      for (int32_t j = k0; j < k1; ++j) {
        const float* k = KeyTile(kt, D, j);
        float t = 0.0f;
        for (int32_t d = 0; d < D; ++d) t = std::fma(q[r][d], k[d * kKeyAlign], t);
        s[static_cast<int64_t>(r) * s_stride + j] = t * scale;
      }
  }
  static float ExpRow(float* s, int32_t n) {
    float m = -INFINITY;
    for (int32_t j = 0; j < n; ++j) m = std::max(m, s[j]);
    float lanes[8] = {};
    const int32_t n8 = n & ~7;
    for (int32_t j = 0; j < n; ++j) {
      s[j] = kernels::ExpApprox(s[j] - m);
      if (j < n8) lanes[j & 7] = lanes[j & 7] + s[j];
    }
    return LaneSum(lanes, s, n8, n);
  }
  static void Values(const float* const* e, int32_t rows, const float* v, int32_t k0, int32_t k1, int32_t Dp,
                     float* acc) {
    for (int32_t r = 0; r < rows; ++r)
      for (int32_t d = 0; d < Dp; ++d) {
        float x = acc[r * Dp + d];
        for (int32_t j = k0; j < k1; ++j) x = std::fma(e[r][j], v[static_cast<int64_t>(j) * Dp + d], x);
        acc[r * Dp + d] = x;
      }
  }
};

}  // namespace

void AttendBlockScalar(const Block& b, const Scratch& sc) { AttendBlock<ScalarKernels>(b, sc); }

}  // namespace attn

bool AttnIsaAvailable(AttnIsa isa) {
  switch (isa) {
    case AttnIsa::kScalar:
      return true;
    case AttnIsa::kAvx2:
      return CpuHasAvx2Fma();
    case AttnIsa::kAvx512:
      return CpuHasAvx512();
  }
  return false;
}

AttnIsa BestAttnIsa() {
  static const AttnIsa best = AttnIsaAvailable(AttnIsa::kAvx512) ? AttnIsa::kAvx512
                              : AttnIsaAvailable(AttnIsa::kAvx2) ? AttnIsa::kAvx2
                                                                 : AttnIsa::kScalar;
  return best;
}

const char* AttnIsaName(AttnIsa isa) {
  switch (isa) {
    case AttnIsa::kScalar:
      return "scalar";
    case AttnIsa::kAvx2:
      return "avx2";
    case AttnIsa::kAvx512:
      return "avx512";
  }
  return "?";
}

void VisionAttention(const float* qkv, int32_t n, int32_t H, int32_t D, float scale, float* out,
                     kernels::ThreadPool* pool, VisionAttentionBuffers* buffers, AttnIsa isa) {
  REWIND_CHECK_MSG(AttnIsaAvailable(isa), "vision attention: this CPU lacks %s", AttnIsaName(isa));
  REWIND_CHECK(n >= 0 && H > 0 && D > 0);
  if (n == 0) return;
  const int64_t E = static_cast<int64_t>(H) * D, stride = 3 * E;
  const int32_t n_pad = (n + attn::kKeyAlign - 1) / attn::kKeyAlign * attn::kKeyAlign,
                Dp = attn::PaddedDims(D);
  // Per head, the keys packed transposed in tiles (attn::KeyTile) and the values in rows of Dp, zero padded.
  const int64_t kt_head = static_cast<int64_t>(D) * n_pad, v_head = static_cast<int64_t>(n) * Dp;
  // Every element is written below, so reused buffers need no clearing.
  VisionAttentionBuffers local;
  VisionAttentionBuffers& bufs = buffers != nullptr ? *buffers : local;
  bufs.keys.resize(static_cast<size_t>(H * kt_head));
  bufs.values.resize(static_cast<size_t>(H * v_head));
  float* const kt_all = bufs.keys.data();
  float* const v_all = bufs.values.data();
  kernels::ParallelFor(pool, H, [&](int64_t h0, int64_t h1) {
    for (int64_t h = h0; h < h1; ++h) {
      float* kh = kt_all + h * kt_head;
      float* vh = v_all + h * v_head;
      for (int32_t j = 0; j < n_pad; ++j) {
        float* kj = kh + (attn::KeyTile(kh, D, j) - kh);  // key j's element 0 in its tile
        for (int32_t d = 0; d < D; ++d)
          kj[d * attn::kKeyAlign] = j < n ? qkv[j * stride + E + h * D + d] : 0.0f;
      }
      for (int32_t j = 0; j < n; ++j) {
        std::copy_n(qkv + j * stride + 2 * E + h * D, D, vh + static_cast<int64_t>(j) * Dp);
        std::fill(vh + static_cast<int64_t>(j) * Dp + D, vh + static_cast<int64_t>(j + 1) * Dp, 0.0f);
      }
    }
  });
  const int32_t blocks = (n + attn::kQueryBlock - 1) / attn::kQueryBlock;
  kernels::ParallelFor(pool, static_cast<int64_t>(H) * blocks, [&](int64_t w0, int64_t w1) {
    thread_local std::vector<float> buf;
    buf.resize(static_cast<size_t>(attn::kQueryBlock) * (n_pad + Dp + 1));
    const attn::Scratch sc{buf.data(), buf.data() + static_cast<size_t>(attn::kQueryBlock) * n_pad,
                           buf.data() + static_cast<size_t>(attn::kQueryBlock) * (n_pad + Dp)};
    for (int64_t w = w0; w < w1; ++w) {
      const int32_t h = static_cast<int32_t>(w / blocks), qb = static_cast<int32_t>(w % blocks);
      attn::Block b;
      b.q = qkv + static_cast<int64_t>(h) * D;
      b.stride = stride;
      b.kt = kt_all + h * kt_head;
      b.v = v_all + h * v_head;
      b.n = n;
      b.n_pad = n_pad;
      b.D = D;
      b.Dp = Dp;
      b.scale = scale;
      b.i0 = qb * attn::kQueryBlock;
      b.i1 = std::min(n, b.i0 + attn::kQueryBlock);
      b.out = out + static_cast<int64_t>(h) * D;
      b.out_stride = E;
      switch (isa) {
        case AttnIsa::kScalar:
          attn::AttendBlockScalar(b, sc);
          break;
        case AttnIsa::kAvx2:
          attn::AttendBlockAvx2(b, sc);
          break;
        case AttnIsa::kAvx512:
          attn::AttendBlockAvx512(b, sc);
          break;
      }
    }
  });
}

}  // namespace rw::vision
