// The per-sequence strategies of the resume coordinator (resume.h): attention serves the common prefix of the
// sequence's tokens with the candidate; the recurrent state serves its live position, the replay window and
// its hash-checked checkpoints.
#pragma once

#include <cstdint>
#include <span>

#include "memory/checkpoint_table.h"
#include "memory/resume.h"
#include "memory/sequence.h"

namespace rw::memory {

// Exact resume point of `candidate` in `seq`, at most `limit`. Among states at the same position prefers
// live, then replay, then checkpoint.
Agreement ResumeInSequence(const Sequence& seq, const CheckpointTable& ckpts, std::span<const int32_t> candidate,
                           int32_t limit);

}  // namespace rw::memory
