#include "vision/encoder.h"

#include <algorithm>
#include <cmath>

#include "kernels/matmul.h"
#include "kernels/rope.h"
#include "vision/attention.h"
#include "vision/vision_ops.h"

namespace rw::vision {

using kernels::ParallelFor;

PreparedImage Prepare(const RgbImage& img, const VisionConfig& cfg, const PreprocessOptions& opt) {
  const int64_t area = static_cast<int64_t>(cfg.align()) * cfg.align();
  const ImageSize target =
      SmartResizeTarget({img.width, img.height}, cfg.align(), opt.min_tokens * area, opt.max_tokens * area);
  const RgbImage sized = ResizePadded(img, target);
  PreparedImage p;
  p.width = sized.width;
  p.height = sized.height;
  p.planar = NormalisePlanar(sized, cfg.mean, cfg.std);
  return p;
}

VisionEncoder::VisionEncoder(const Mmproj& mmproj, int32_t n_threads)
    : mm_(mmproj), pool_(std::make_unique<kernels::ThreadPool>(std::max(1, n_threads))) {}

namespace {

void AddBias(float* y, const float* b, int64_t rows, int64_t n) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < n; ++i) y[r * n + i] = y[r * n + i] + b[i];
}

}  // namespace

Expected<ImageEmbedding> VisionEncoder::Encode(const PreparedImage& img) const {
  const VisionConfig& c = mm_.config();
  const int32_t ps = c.patch_size, E = c.n_embd;
  if (img.width <= 0 || img.height <= 0 || img.width % c.align() != 0 || img.height % c.align() != 0 ||
      img.planar.size() != static_cast<size_t>(3) * img.width * img.height)
    return Error::InvalidArgument("vision: image size " + std::to_string(img.width) + "x" +
                                  std::to_string(img.height) + " is not a multiple of " + std::to_string(c.align()));
  const int32_t px = img.width / ps, py = img.height / ps, n = px * py;
  const int64_t K = 3 * ps * ps;
  kernels::ThreadPool* pool = pool_.get();

  // Patch rows in merge order: 2x2 blocks row-major, inside a block (dy, dx) row-major (llama.cpp's permutes).
  std::vector<int32_t> prow(n), pcol(n);
  {
    int32_t k = 0;
    for (int32_t by = 0; by < py; by += 2)
      for (int32_t bx = 0; bx < px; bx += 2)
        for (int32_t dy = 0; dy < 2; ++dy)
          for (int32_t dx = 0; dx < 2; ++dx, ++k) {
            prow[k] = by + dy;
            pcol[k] = bx + dx;
          }
  }
  std::vector<float> patches(static_cast<size_t>(n) * K);  // [n][3][ps][ps]
  const size_t plane = static_cast<size_t>(img.width) * img.height;
  ParallelFor(pool, n, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      float* r = patches.data() + i * K;
      for (int32_t ch = 0; ch < 3; ++ch)
        for (int32_t ky = 0; ky < ps; ++ky) {
          const float* src = img.planar.data() + ch * plane +
                             static_cast<size_t>(prow[i] * ps + ky) * img.width + pcol[i] * ps;
          std::copy_n(src, ps, r + (ch * ps + ky) * ps);
        }
    }
  });
  std::vector<float> x(static_cast<size_t>(n) * E), tmp(static_cast<size_t>(n) * E);
  kernels::MatMul(mm_.patch0, patches.data(), n, x.data(), pool);
  kernels::MatMul(mm_.patch1, patches.data(), n, tmp.data(), pool);
  for (size_t i = 0; i < x.size(); ++i) x[i] = x[i] + tmp[i];
  AddBias(x.data(), mm_.patch_bias, n, E);
  const std::vector<float> pos = ResizePositions(mm_.pos_embd, c.pos_side, E, px, py);
  for (int32_t i = 0; i < n; ++i) {
    const float* p = &pos[(static_cast<size_t>(prow[i]) * px + pcol[i]) * E];
    for (int32_t k = 0; k < E; ++k) x[static_cast<size_t>(i) * E + k] = x[static_cast<size_t>(i) * E + k] + p[k];
  }

  // RoPE caches per patch: (row, col).
  const int32_t D = c.d_head, H = c.n_head;
  std::vector<float> rope(static_cast<size_t>(n) * D);
  for (int32_t i = 0; i < n; ++i) VisionRopeCache(prow[i], pcol[i], D, rope.data() + static_cast<size_t>(i) * D);

  std::vector<float> t(static_cast<size_t>(n) * E), qkv(static_cast<size_t>(n) * 3 * E),
      att(static_cast<size_t>(n) * E), ff(static_cast<size_t>(n) * c.n_ff);
  VisionAttentionBuffers attn_buffers;
  auto norm_rows = [&](const float* w, const float* b, float* out) {
    ParallelFor(pool, n, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) LayerNormRow(x.data() + i * E, w, b, E, c.eps, out + i * E);
    });
  };
  for (const VisionLayer& L : mm_.layers) {
    norm_rows(L.ln1_w, L.ln1_b, t.data());
    kernels::MatMul(L.qkv, t.data(), n, qkv.data(), pool);
    AddBias(qkv.data(), L.qkv_b, n, 3 * E);
    ParallelFor(pool, n, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i)
        for (int32_t h = 0; h < H; ++h)
          for (int32_t part = 0; part < 2; ++part)  // q, k
            kernels::RopeApply(rope.data() + i * D, D, qkv.data() + i * 3 * E + part * E + h * D);
    });
    VisionAttention(qkv.data(), n, H, D, 1.0f / std::sqrt(static_cast<float>(D)), att.data(), pool, &attn_buffers);
    kernels::MatMul(L.out, att.data(), n, t.data(), pool);
    AddBias(t.data(), L.out_b, n, E);
    for (size_t i = 0; i < x.size(); ++i) x[i] = t[i] + x[i];
    norm_rows(L.ln2_w, L.ln2_b, t.data());
    kernels::MatMul(L.up, t.data(), n, ff.data(), pool);
    AddBias(ff.data(), L.up_b, n, c.n_ff);
    ParallelFor(pool, n, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) GeluRow(ff.data() + i * c.n_ff, c.n_ff);
    });
    kernels::MatMul(L.down, ff.data(), n, t.data(), pool);
    AddBias(t.data(), L.down_b, n, E);
    for (size_t i = 0; i < x.size(); ++i) x[i] = x[i] + t[i];
  }
  norm_rows(mm_.post_ln_w, mm_.post_ln_b, t.data());

  // Merger: 4 consecutive patches (one 2x2 block) form one row of 4E.
  const int32_t n_tok = n / 4, n_mid = static_cast<int32_t>(mm_.mm0.n_rows);
  std::vector<float> mid(static_cast<size_t>(n_tok) * n_mid);
  kernels::MatMul(mm_.mm0, t.data(), n_tok, mid.data(), pool);
  AddBias(mid.data(), mm_.mm0_b, n_tok, n_mid);
  ParallelFor(pool, n_tok, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) GeluRow(mid.data() + i * n_mid, n_mid);
  });
  ImageEmbedding out;
  out.nx = px / 2;
  out.ny = py / 2;
  out.n_embd = c.n_out;
  out.rows.resize(static_cast<size_t>(n_tok) * c.n_out);
  kernels::MatMul(mm_.mm2, mid.data(), n_tok, out.rows.data(), pool);
  AddBias(out.rows.data(), mm_.mm2_b, n_tok, c.n_out);
  return out;
}

}  // namespace rw::vision
