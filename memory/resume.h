// ONE notion of "where can this sequence resume" (STYLE.md 4). Each memory kind answers "how long a prefix of
// the candidate can you serve, at most `limit`?"; the coordinator lowers the length until both agree. Attention
// can serve any prefix of what it holds; the recurrent state only the exact positions where an exact state
// exists (I2), so the agreed length is always a position with a valid state.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "memory/ids.h"

namespace rw::memory {

enum class StateSource { kZero, kLive, kCheckpoint, kReplay };
const char* StateSourceName(StateSource s);  // "none" | "live" | "checkpoint" | "replay"

struct ExactState {
  int32_t pos = 0;
  StateSource source = StateSource::kZero;
  CheckpointId ckpt = kNone;  // kCheckpoint
};

class AttentionStrategy {
 public:
  virtual ~AttentionStrategy() = default;
  virtual int32_t Longest(int32_t limit) const = 0;  // longest servable prefix length <= limit
};

class RecurrentStrategy {
 public:
  virtual ~RecurrentStrategy() = default;
  virtual ExactState Longest(int32_t limit) const = 0;  // exact state at the largest position <= limit
};

struct Agreement {
  int32_t attention_len = 0;  // what attention alone could serve at the first ask (the LCP)
  ExactState state;           // state.pos is the agreed length
};

Agreement Coordinate(const AttentionStrategy& attention, const RecurrentStrategy& recurrent, int32_t limit);

// I4: why a prompt of `prompt_size` tokens resumes at `resume` when `lcp` tokens are shared with the cache:
// "no shared prefix", "shared prefix of 1450 tokens but no exact state at or before it",
// "nearest checkpoint at 1200, LCP at 1450", "live state at 1450, LCP at 1450", ...
std::string ResumeReason(int32_t lcp, int32_t resume, StateSource source, int32_t prompt_size);

// hashes[i] = rw::HashTokens(tokens[0, i)), i in [0, size].
std::vector<uint64_t> PrefixHashes(std::span<const int32_t> tokens);
int32_t CommonPrefix(std::span<const int32_t> a, std::span<const int32_t> b);

}  // namespace rw::memory
