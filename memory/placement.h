// Where to snapshot checkpoints during a prefill (pure functions). Divergences between consecutive requests
// happen at predictable places: message starts, the generation header, observed branch points, and anywhere
// inside long messages (bounded by an interval), plus positions a client asks for.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace rw::memory {

struct PlacementInput {
  int32_t prompt_size = 0;
  int32_t resume_pos = 0;                   // evaluation starts here (only positions after it are planned)
  std::span<const int32_t> message_starts;  // from the chat renderer
  int32_t generation_header = -1;           // start of the assistant header (-1: none)
  std::span<const int32_t> branch_points;   // PrefixTree::BranchPoints(prompt)
  int32_t interval = 0;                     // every N tokens inside a message span (0: off)
  std::span<const int32_t> requested;       // client-requested positions
  int32_t max_chunk = 512;                  // longest prefill batch
};

struct Placement {
  std::vector<int32_t> checkpoints;  // sorted, unique, in (resume_pos, prompt_size)
  std::vector<int32_t> chunk_ends;   // sorted; every checkpoint is a chunk end; last = prompt_size
};

// Checkpoint positions: each hint in (resume_pos, prompt_size); interval positions start + k*N inside every
// span between consecutive message starts / the generation header / the prompt end (the whole prompt is one
// span when there are no message starts). Positions outside the range are ignored, never an error.
std::vector<int32_t> PlaceCheckpoints(const PlacementInput& in);

// Chunk ends from resume_pos to prompt_size: at most max_chunk tokens per chunk, ending at every checkpoint.
std::vector<int32_t> ChunkEnds(int32_t resume_pos, int32_t prompt_size, std::span<const int32_t> checkpoints,
                               int32_t max_chunk);

Placement PlanPlacement(const PlacementInput& in);

}  // namespace rw::memory
