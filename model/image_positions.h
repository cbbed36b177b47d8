// Images in a sequence, for the language model: the token positions whose input rows come from the vision encoder
// instead of token_embd, and the M-RoPE positions of every token (llama.cpp's mtmd layout for the Qwen-VL
// projectors): an image of nx x ny tokens starting at rotary position s gives token i the position (t = s,
// row = s + i / nx, col = s + i % nx, e = 0) and advances the position by max(nx, ny), not by nx·ny; text tokens
// take (p, p, p, 0). The KV row of a token stays its index in the sequence, so causality is token order.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/expected.h"

namespace rw::model {

// Image placeholder ids (vision::ImageTokenIds) lie in [kImageTokenBase, 2^31), above every vocabulary: a saved
// prefix may hold them where its images were.
inline constexpr int32_t kImageTokenBase = 1 << 30;
inline bool IsImageTokenId(int32_t t) { return t >= kImageTokenBase; }

struct ImageSpan {
  int32_t start = 0;            // sequence index of the image's first token
  int32_t nx = 0, ny = 0;       // token grid: nx per row, ny rows
  const float* rows = nullptr;  // [ny·nx][n_embd], owned by the caller for the forward's duration
  int32_t n_tokens() const { return nx * ny; }
  int32_t end() const { return start + nx * ny; }
};

class SeqImages {
 public:
  SeqImages() = default;
  // Spans must be sorted and disjoint, each with a positive grid and rows. Errors name the bad span.
  static Expected<SeqImages> Make(std::vector<ImageSpan> spans);
  std::span<const ImageSpan> spans() const { return spans_; }
  bool empty() const { return spans_.empty(); }
  // The span holding sequence index p, or null.
  const ImageSpan* Find(int32_t p) const;
  // (t, row, col, e) of the token at sequence index p.
  std::array<int32_t, 4> RopePos(int32_t p) const;

 private:
  std::vector<ImageSpan> spans_;
};

}  // namespace rw::model
