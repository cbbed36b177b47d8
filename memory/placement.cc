#include "memory/placement.h"

#include <algorithm>

#include "base/check.h"

namespace rw::memory {

std::vector<int32_t> PlaceCheckpoints(const PlacementInput& in) {
  std::vector<int32_t> pos;
  auto add = [&](int32_t p) {
    if (p > in.resume_pos && p < in.prompt_size) pos.push_back(p);
  };
  for (int32_t p : in.message_starts) add(p);
  add(in.generation_header);
  for (int32_t p : in.branch_points) add(p);
  for (int32_t p : in.requested) add(p);
  if (in.interval > 0) {
    std::vector<int32_t> bounds = {0};
    for (int32_t p : in.message_starts)
      if (p > 0 && p < in.prompt_size) bounds.push_back(p);
    if (in.generation_header > 0 && in.generation_header < in.prompt_size) bounds.push_back(in.generation_header);
    bounds.push_back(in.prompt_size);
    std::sort(bounds.begin(), bounds.end());
    bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
    for (size_t i = 0; i + 1 < bounds.size(); ++i)
      for (int64_t p = int64_t{bounds[i]} + in.interval; p < bounds[i + 1]; p += in.interval)
        add(static_cast<int32_t>(p));
  }
  std::sort(pos.begin(), pos.end());
  pos.erase(std::unique(pos.begin(), pos.end()), pos.end());
  return pos;
}

std::vector<int32_t> ChunkEnds(int32_t resume_pos, int32_t prompt_size, std::span<const int32_t> checkpoints,
                               int32_t max_chunk) {
  REWIND_CHECK(max_chunk > 0 && resume_pos >= 0 && resume_pos <= prompt_size);
  std::vector<int32_t> ends;
  int32_t at = resume_pos;
  size_t k = 0;
  while (at < prompt_size) {
    while (k < checkpoints.size() && checkpoints[k] <= at) ++k;
    int32_t next = std::min<int64_t>(int64_t{at} + max_chunk, prompt_size);
    if (k < checkpoints.size() && checkpoints[k] < next) next = checkpoints[k];
    ends.push_back(next);
    at = next;
  }
  return ends;
}

Placement PlanPlacement(const PlacementInput& in) {
  Placement out;
  out.checkpoints = PlaceCheckpoints(in);
  out.chunk_ends = ChunkEnds(in.resume_pos, in.prompt_size, out.checkpoints, in.max_chunk);
  return out;
}

}  // namespace rw::memory
