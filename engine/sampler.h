// Per-request token sampling: greedy at temperature 0, else temperature -> top-k -> top-p -> min-p over a seeded
// RNG owned by the request (so results do not depend on other requests in the batch).
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "engine/engine.h"

namespace rw::engine {

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);

  // Picks the next token from one row of logits [n_vocab].
  int32_t Sample(std::span<const float> logits);

  // log-softmax of the raw logits (the model's distribution, independent of temperature) for `token`,
  // and the n most likely tokens, descending (ties -> lower id first).
  static float Logprob(std::span<const float> logits, int32_t token);
  static std::vector<TokenLogprob> TopLogprobs(std::span<const float> logits, int32_t n);
  static int32_t Argmax(std::span<const float> logits);

 private:
  SamplingParams params_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> candidates_;  // scratch [n_vocab]
};

}  // namespace rw::engine
