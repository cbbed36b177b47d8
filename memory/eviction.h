// Which cached entry to drop first: ONE pure scoring function (STYLE.md 7). The score of an entry is the
// prefill work it saves per byte it costs, aged by a logical clock of last use (Marconi-style); the lowest
// score goes first. Same inputs, same evictions.
#pragma once

#include <cstdint>
#include <span>

#include "memory/prefix_tree.h"

namespace rw::memory {

// saved_tokens / bytes, halved every `half_life` ticks since last use. Worthless entries (pages past the
// deepest checkpoint of a path: saved_tokens == 0) score 0 and go first.
double EvictionScore(int64_t saved_tokens, int64_t bytes, uint64_t last_use, uint64_t now, int64_t half_life);

// Strict order: lower score first; ties: older last use, then node id.
bool EvictsBefore(const EvictionCandidate& a, const EvictionCandidate& b, uint64_t now, int64_t half_life);

// Index of the first victim in `candidates` (which must not be empty).
size_t PickVictim(std::span<const EvictionCandidate> candidates, uint64_t now, int64_t half_life);

}  // namespace rw::memory
