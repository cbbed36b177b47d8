// The Qwen3-VL / Qwen3.5 vision tower of the qwen3vl_merger projector, on the CPU kernels: temporal patch pair
// (the same image through v.patch_embd.weight and .weight.1, summed), patch bias, learned position embeddings
// resized to the grid (bilinear, align corners), ViT blocks (LayerNorm, fused QKV, 2-D vision RoPE, full
// attention, GELU MLP), v.post_ln, and the 2x2 merger mm.0 -> GELU -> mm.2. The graph of llama.cpp v0.5.0's
// clip_graph_qwen3vl without deepstack. Deterministic: the bits depend on the pixels and the weights only, never on
// the thread count (every output element is reduced in one fixed order).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "base/expected.h"
#include "kernels/thread_pool.h"
#include "vision/mmproj.h"
#include "vision/preprocess.h"

namespace rw::vision {

// How images are sized before encoding (llama.cpp's --image-min-tokens / --image-max-tokens; defaults are
// llama.cpp's for the Qwen-VL projectors: 8 and 4096 merged tokens).
struct PreprocessOptions {
  int32_t min_tokens = 8;
  int32_t max_tokens = 4096;
};

// An image ready for the tower: normalised planar pixels of a size that is a multiple of 32 on each side.
struct PreparedImage {
  int32_t width = 0, height = 0;
  std::vector<float> planar;  // [3][height][width]
  int32_t nx() const { return width / 32; }   // merged tokens per row (patch 16, merge 2)
  int32_t ny() const { return height / 32; }
};

// Smart resize + padded bicubic resample + normalisation, as llama.cpp's mtmd does for this projector.
PreparedImage Prepare(const RgbImage& img, const VisionConfig& cfg, const PreprocessOptions& opt);

struct ImageEmbedding {
  int32_t nx = 0, ny = 0;     // merged tokens per row, rows
  int32_t n_embd = 0;         // the language model's embedding length
  std::vector<float> rows;    // [ny·nx][n_embd], row-major over the token grid
  int32_t n_tokens() const { return nx * ny; }
};

class VisionEncoder {
 public:
  VisionEncoder(const Mmproj& mmproj, int32_t n_threads);
  // Runs the tower on a prepared image. Errors: a size that is not a multiple of patch × merge.
  Expected<ImageEmbedding> Encode(const PreparedImage& img) const;
  const Mmproj& mmproj() const { return mm_; }

 private:
  const Mmproj& mm_;
  std::unique_ptr<kernels::ThreadPool> pool_;
};

}  // namespace rw::vision
