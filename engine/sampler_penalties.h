// The history-dependent stages of the sampler chain: repeat/frequency/presence penalties and DRY (semantics
// of llama.cpp's `penalties` and `dry` samplers). Each keeps the last N tokens it needs (prompt included) and
// changes only the logits of tokens in that window: O(window) per step, never O(vocabulary) when the
// candidates are still the whole vocabulary in id order.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/sampler_stages.h"

namespace rw::engine {

class Penalties {
 public:
  Penalties(int32_t last_n, float repeat, float frequency, float presence);
  bool enabled() const {
    return last_n_ != 0 && (repeat_ != 1.0f || frequency_ != 0.0f || presence_ != 0.0f);
  }
  void Accept(int32_t token);
  void Apply(Candidates* c) const;

 private:
  int32_t last_n_;
  float repeat_, frequency_, presence_;
  std::deque<int32_t> window_;
  std::unordered_map<int32_t, int32_t> count_;
};

// What DRY needs from the vocabulary: each token's text and a plain-text tokenizer.
struct DryVocab {
  const std::vector<std::string>* pieces = nullptr;  // [n_vocab]
  std::function<std::vector<int32_t>(std::string_view)> encode;
};

// Sequence breakers against the vocabulary: head token -> tail tokens. Each breaker string becomes the tokens
// containing it (empty tail) and, for a token that ends with a prefix of it, the tokenisation of the rest
// (tail, at most 20 tokens). Building it scans the vocabulary and runs the tokenizer once per breaker, so it is
// built on the request's own thread (BuildDryBreakers) and shared read-only by the request's sampler.
using DryBreakers = std::unordered_multimap<int32_t, std::vector<int32_t>>;
std::shared_ptr<const DryBreakers> BuildDryBreakers(const std::vector<std::string>& breakers,
                                                    const DryVocab& vocab);

class Dry {
 public:
  // `breakers`: from BuildDryBreakers (null: none).
  Dry(float multiplier, float base, int32_t allowed_length, int32_t last_n,
      std::shared_ptr<const DryBreakers> breakers);
  bool enabled() const { return multiplier_ != 0.0f && base_ >= 1.0f && last_n_ != 0; }
  void Accept(int32_t token);
  void Apply(Candidates* c);

 private:
  float multiplier_, base_;
  int32_t allowed_length_, last_n_;
  std::shared_ptr<const DryBreakers> breakers_;                      // never null
  std::deque<int32_t> last_;                                         // the last last_n_ tokens, oldest first
  std::vector<int32_t> repeat_;                                      // scratch [last_n]
  std::unordered_map<int32_t, int32_t> max_repeat_;  // scratch: token -> repeat it would extend
};

// Adds `delta` to the logit of `token` in place (by index on the untouched vocabulary, else by search).
void AdjustLogit(Candidates* c, int32_t token, const std::function<float(float)>& f);

}  // namespace rw::engine
