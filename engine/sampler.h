// Per-request token sampling, llama-server's chain: logit_bias -> grammar mask -> the `stages` in order
// (penalties, DRY, top-n-sigma, top-k, typical-p, top-p, min-p, XTC, temperature by default) -> a draw from
// the request's seeded RNG; or temperature -> mirostat v1/v2. The RNG and history are the request's own, so
// results do not depend on other requests in the batch.
//
// Every draw goes through Distribution(): random stages (XTC's coin) draw first, then the final distribution
// is fixed, and both a plain draw (Sample) and speculative verification (SpeculativeStep) sample exactly from
// it. Accept(token) then advances the history (penalties, DRY, mirostat's mu, the grammar), so a verify round
// that accepts k drafts leaves the sampler exactly where k plain steps would have.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/sampler_penalties.h"
#include "engine/sampler_stages.h"
#include "grammar/matcher.h"

namespace rw::tokenizer {
class Tokenizer;
}

namespace rw::engine {

// What the sampler needs to know about the vocabulary (built once per model; may be empty for tests without a
// tokenizer, then DRY breakers and grammars are unavailable).
struct SamplerVocab {
  std::vector<std::string> pieces;  // [n_vocab] token text as bytes; "" for control tokens
  std::vector<int32_t> eog;         // end-of-generation tokens
  std::function<std::vector<int32_t>(std::string_view)> encode;  // plain text -> tokens
  std::unique_ptr<grammar::TokenTrie> trie;                      // over `pieces`

  // Builds the trie over the non-empty pieces.
  void BuildTrie();
};

// The DRY breaker table of `params` (null when DRY is off): the per-request work that grows with the request,
// done by whoever calls it (Engine::Submit, on the request's thread).
std::shared_ptr<const DryBreakers> PrepareDry(const SamplingParams& params, const SamplerVocab* vocab);

// The vocabulary of a model's tokenizer, without the trie (sampler_vocab.cc; built with the engine).
SamplerVocab MakeSamplerVocab(std::shared_ptr<const tokenizer::Tokenizer> tok);

class Sampler {
 public:
  // `n_ctx` resolves the -1 ("whole context") of repeat_last_n and dry_penalty_last_n. `vocab` must outlive
  // the sampler; null when no grammar or DRY breakers are used. `grammar` is a compiled GBNF grammar or null.
  // `dry`: the request's breaker table from PrepareDry (null: built here, from `vocab`, when DRY is on).
  Sampler(const SamplingParams& params, const SamplerVocab* vocab = nullptr, int32_t n_ctx = 4096,
          std::shared_ptr<const grammar::Grammar> grammar = nullptr,
          std::shared_ptr<const DryBreakers> dry = nullptr);

  // The prompt, for the penalties' and DRY's history (the grammar starts after it).
  void AcceptPrompt(std::span<const int32_t> prompt);
  // The token was emitted: history, mirostat and grammar advance.
  void Accept(int32_t token);

  // Picks the next token from one row of logits [n_vocab].
  int32_t Sample(std::span<const float> logits);
  // The sampling distribution of this step: (token, probability) pairs summing to 1. Draws the step's random
  // numbers (XTC), so call it once per step (Sample and SpeculativeStep do).
  std::vector<std::pair<int32_t, double>> Distribution(std::span<const float> logits);
  // Speculative sampling with a deterministic draft token: accept `draft` with probability p(draft); on
  // rejection sample from p with `draft` removed (renormalised). Returns the chosen token; this preserves the
  // target distribution exactly (a token the grammar rejects has p = 0 and is never accepted).
  int32_t SpeculativeStep(std::span<const float> logits, int32_t draft, bool* accepted);
  // A uniform number in [0, 1) from the request's RNG (benchmark-only synthetic acceptance).
  double Uniform();
  // Whether the grammar (if any) allows `token` now.
  bool Allowed(int32_t token) const;

  // log-softmax of the raw logits (the model's distribution, independent of temperature) for `token`,
  // and the n most likely tokens, descending (ties -> lower id first).
  static float Logprob(std::span<const float> logits, int32_t token);
  static std::vector<TokenLogprob> TopLogprobs(std::span<const float> logits, int32_t n);
  static int32_t Argmax(std::span<const float> logits);

 private:
  bool IsEog(int32_t token) const;
  void Load(std::span<const float> logits);
  void ApplyStage(SamplerStage stage, double xtc_coin);
  // The grammar mask: over the whole vocabulary (token trie), or only as far down the logit order as the best
  // k allowed tokens (the usual case when top-k comes first; falls back to the trie when few tokens are
  // allowed).
  void MaskAll();
  void GrammarTopK(int32_t k);
  bool GreedyShortcut() const;
  bool CommutesWithMask(SamplerStage stage) const;

  SamplingParams params_;
  const SamplerVocab* vocab_;
  int32_t n_vocab_ = 0;
  std::mt19937_64 rng_;
  Penalties penalties_;
  Dry dry_;
  std::unique_ptr<grammar::Matcher> matcher_;
  float mu_ = 0.0f;                               // mirostat
  std::vector<std::pair<int32_t, double>> last_;  // the last Distribution (mirostat's observed surprise)
  Candidates cand_;                               // scratch [n_vocab]
  std::vector<Candidate> top_;                    // scratch: the best candidates, in order
  std::vector<uint64_t> mask_;  // scratch [ceil(n_vocab / 64)]: the grammar's allowed tokens
};

}  // namespace rw::engine
