#include "model/image_positions.h"

#include <algorithm>

namespace rw::model {

Expected<SeqImages> SeqImages::Make(std::vector<ImageSpan> spans) {
  int32_t prev_end = 0;
  for (size_t i = 0; i < spans.size(); ++i) {
    const ImageSpan& s = spans[i];
    const std::string where = "image " + std::to_string(i) + ": ";
    if (s.nx <= 0 || s.ny <= 0 || s.rows == nullptr) return Error::InvalidArgument(where + "empty token grid");
    if (s.start < prev_end) return Error::InvalidArgument(where + "overlaps the previous image or is out of order");
    prev_end = s.end();
  }
  SeqImages out;
  out.spans_ = std::move(spans);
  return out;
}

const ImageSpan* SeqImages::Find(int32_t p) const {
  auto it = std::upper_bound(spans_.begin(), spans_.end(), p,
                             [](int32_t v, const ImageSpan& s) { return v < s.start; });
  if (it == spans_.begin()) return nullptr;
  --it;
  return p < it->end() ? &*it : nullptr;
}

std::array<int32_t, 4> SeqImages::RopePos(int32_t p) const {
  int32_t saved = 0;  // tokens minus positions of the images before p
  for (const ImageSpan& s : spans_) {
    if (p < s.start) break;
    if (p < s.end()) {
      const int32_t base = s.start - saved, i = p - s.start;
      return {base, base + i / s.nx, base + i % s.nx, 0};
    }
    saved += s.n_tokens() - std::max(s.nx, s.ny);
  }
  const int32_t q = p - saved;
  return {q, q, q, 0};
}

}  // namespace rw::model
