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

  // The sampling distribution after temperature, top-k, min-p and top-p: (token, probability) pairs, descending,
  // probabilities summing to 1. Greedy (temperature 0) gives the argmax with probability 1.
  std::vector<std::pair<int32_t, double>> Distribution(std::span<const float> logits);
  // Speculative sampling with a deterministic draft token: accept `draft` with probability p(draft); on
  // rejection sample from p with `draft` removed (renormalised). Returns the chosen token; this preserves the
  // target distribution exactly.
  int32_t SpeculativeStep(std::span<const float> logits, int32_t draft, bool* accepted);
  // A uniform number in [0, 1) from the request's RNG (benchmark-only synthetic acceptance).
  double Uniform();

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
