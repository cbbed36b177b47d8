// Per-request token sampling, llama-server's chain: logit_bias -> grammar mask -> the `stages` in order
// (penalties, DRY, top-n-sigma, top-k, typical-p, top-p, min-p, XTC, temperature by default) -> a draw from
// the request's seeded RNG; or temperature -> mirostat v1/v2. The RNG and history are the request's own, so
// results do not depend on other requests in the batch.
//
// Every draw goes through Distribution(): random stages (XTC's coin) draw first, then the final distribution
// is fixed, and both a plain draw (Sample) and speculative verification (SpeculativeStep) sample exactly from
// it. Accept(token) then advances the history (penalties, DRY, mirostat's mu, the grammar), so a verify round
// that accepts k drafts leaves the sampler exactly where k plain steps would have.
//
// A row is either the full logits row or, where CandidatesNeeded() > 0, only the row's best (logit, id) pairs
// (ForwardOptions::top_k: a GPU then downloads 8·K bytes per row instead of 4·n_vocab): both give the same
// token, the same distribution and the same draws from the RNG (docs/api.md, "Sampling"). NaN logits count as -inf
// in both, as in the forward's top-k selection.
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
#include "kernels/top_logits.h"

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

// One output row as the sampler reads it: the full logits [n_vocab], or the row's best min(K, n_vocab) pairs in
// the forward's order (descending logit, ties to the lower id, NaN as -inf; ForwardOutput::Top).
struct SampleRow {
  std::span<const float> logits;           // [n_vocab], or empty when `top` holds the row
  std::span<const kernels::TopLogit> top;  // the best pairs when `logits` is empty
  int32_t n_vocab = 0;

  static SampleRow Full(std::span<const float> l) { return {l, {}, static_cast<int32_t>(l.size())}; }
  static SampleRow Top(std::span<const kernels::TopLogit> t, int32_t n_vocab) { return {{}, t, n_vocab}; }
  bool full() const { return top.empty(); }
};

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

  // How many of a row's best (logit, id) pairs this configuration needs to give exactly what the full row
  // gives (token, distribution, RNG draws): 1..kernels::kMaxTopLogits, or 0 when it needs the full row. It
  // depends on the parameters only (never on the history), so it holds for every row of a request:
  //   0 with a grammar, a logit_bias or mirostat (they read or change arbitrary tokens);
  //   greedy (temperature <= 0, no XTC or typical-p in the chain): 1, or 0 with active penalties or DRY
  //   (they lower or raise the logits of arbitrary history tokens);
  //   otherwise the first active stage of `stages` decides: top-k with k <= kMaxTopLogits gives k (every
  //   later stage, penalties included, only sees the k survivors), a temperature <= 0 gives 1, anything
  //   else (top-p, min-p, typical-p, XTC, top-n-sigma, penalties, DRY, a temperature other than 1, or no
  //   active stage) reads the whole distribution: 0. A temperature of exactly 1 and switched-off stages
  //   change no bit and are skipped.
  // Logprobs are the caller's business (they need the full row: Logprob, TopLogprobs).
  int32_t CandidatesNeeded() const;

  // Picks the next token from one row. A row of pairs needs CandidatesNeeded() > 0 and at least that many
  // pairs (or all n_vocab); anything else is a caller bug and aborts.
  int32_t Sample(const SampleRow& row);
  int32_t Sample(std::span<const float> logits) { return Sample(SampleRow::Full(logits)); }
  // The sampling distribution of this step: (token, probability) pairs summing to 1. Draws the step's random
  // numbers (XTC), so call it once per step (Sample and SpeculativeStep do).
  std::vector<std::pair<int32_t, double>> Distribution(const SampleRow& row);
  std::vector<std::pair<int32_t, double>> Distribution(std::span<const float> logits) {
    return Distribution(SampleRow::Full(logits));
  }
  // Speculative sampling with a deterministic draft token: accept `draft` with probability p(draft); on
  // rejection sample from p with `draft` removed (renormalised). Returns the chosen token; this preserves the
  // target distribution exactly (a token the grammar rejects has p = 0 and is never accepted).
  int32_t SpeculativeStep(const SampleRow& row, int32_t draft, bool* accepted);
  int32_t SpeculativeStep(std::span<const float> logits, int32_t draft, bool* accepted) {
    return SpeculativeStep(SampleRow::Full(logits), draft, accepted);
  }
  // A uniform number in [0, 1) from the request's RNG (benchmark-only synthetic acceptance).
  double Uniform();
  // Whether the grammar (if any) allows `token` now.
  bool Allowed(int32_t token) const;

  // log-softmax of the raw logits (the model's distribution, independent of temperature) for `token`,
  // and the n most likely tokens, descending (ties -> lower id first).
  static float Logprob(std::span<const float> logits, int32_t token);
  static std::vector<TokenLogprob> TopLogprobs(std::span<const float> logits, int32_t n);
  // The best token (ties -> lowest id, NaN counted as -inf).
  static int32_t Argmax(std::span<const float> logits);

 private:
  bool IsEog(int32_t token) const;
  void Load(const SampleRow& row);
  bool StageActive(SamplerStage stage) const;
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
