// The mmproj GGUF of llama.cpp's `qwen3vl_merger` projector (what convert_hf_to_gguf.py writes for Qwen3-VL,
// Qwen3.5 and Qwen3.6 with --mmproj): configuration from the clip.* keys and the vision tower's weights, bound
// without copies (the position table is dequantised once). Anything else in the file (another projector,
// deepstack layers, an audio encoder, a tensor we would ignore) is refused with an error naming it.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/expected.h"
#include "base/sha256.h"
#include "gguf/gguf.h"
#include "kernels/matmul.h"

namespace rw::vision {

struct VisionConfig {
  int32_t n_embd = 0;      // clip.vision.embedding_length
  int32_t n_head = 0;      // clip.vision.attention.head_count
  int32_t d_head = 0;      // n_embd / n_head
  int32_t n_ff = 0;        // clip.vision.feed_forward_length
  int32_t n_layer = 0;     // clip.vision.block_count
  int32_t patch_size = 0;  // clip.vision.patch_size (16 for Qwen3.5)
  int32_t n_merge = 2;     // clip.vision.spatial_merge_size
  int32_t n_out = 0;       // merger output width = the language model's embedding length
  int32_t pos_side = 0;    // sqrt(rows of v.position_embd.weight)
  float eps = 1e-6f;       // clip.vision.attention.layer_norm_epsilon
  std::array<float, 3> mean{}, std{};  // clip.vision.image_mean / image_std
  int32_t align() const { return patch_size * n_merge; }  // pixels per merged token side (32)
};

struct VisionLayer {
  kernels::Matrix qkv, out, up, down;
  const float *qkv_b = nullptr, *out_b = nullptr, *up_b = nullptr, *down_b = nullptr;
  const float *ln1_w = nullptr, *ln1_b = nullptr, *ln2_w = nullptr, *ln2_b = nullptr;
};

class Mmproj {
 public:
  static Expected<std::unique_ptr<Mmproj>> Load(const std::string& path);
  static Expected<std::unique_ptr<Mmproj>> FromFile(std::unique_ptr<gguf::File> file);

  const VisionConfig& config() const { return cfg_; }
  // SHA-256 over the file's metadata and tensor layout plus its fingerprint (base of image cache keys).
  const Digest256& identity() const { return identity_; }
  const std::string& path() const { return path_; }

  kernels::Matrix patch0, patch1;       // [n_embd][3·ps·ps] (GGUF {ps, ps, 3, n_embd})
  const float* patch_bias = nullptr;    // [n_embd]
  std::vector<float> pos_embd;          // [pos_side²][n_embd]
  std::vector<VisionLayer> layers;
  const float *post_ln_w = nullptr, *post_ln_b = nullptr;
  kernels::Matrix mm0, mm2;             // [4·n_embd → n_ff_merger], [→ n_out]
  const float *mm0_b = nullptr, *mm2_b = nullptr;

 private:
  Mmproj() = default;
  std::unique_ptr<gguf::File> file_;
  VisionConfig cfg_;
  Digest256 identity_{};
  std::string path_;
};

}  // namespace rw::vision
