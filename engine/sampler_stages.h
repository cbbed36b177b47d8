// The filters of the sampler chain as pure functions over a candidate list (semantics of llama.cpp's samplers
// of the same names). None sorts the whole vocabulary unless its definition needs an order over all
// candidates (typical_p, mirostat v1); top-k selects, top-p sorts a growing prefix, min-p and top-n-sigma
// filter in place.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace rw::engine {

struct Candidate {
  int32_t id = 0;
  float logit = 0.0f;
  double p = 0.0;  // valid after Softmax
};

struct Candidates {
  std::vector<Candidate> data;
  bool sorted = false;    // descending logit, ties -> lower id first
  bool identity = false;  // data[i].id == i for every i (the untouched vocabulary, for sparse stages)
};

// Descending logit, ties -> lower id first: the one order every stage uses, so results never depend on the
// order candidates arrived in.
inline bool Better(const Candidate& a, const Candidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

void SortPrefix(Candidates* c, size_t n);  // the n best first, sorted (the rest in any order)
void Softmax(Candidates* c);               // p over the current candidates
void TopK(Candidates* c, int32_t k);
void TopP(Candidates* c, float p, int32_t min_keep);
void MinP(Candidates* c, float p, int32_t min_keep);
void TypicalP(Candidates* c, float p, int32_t min_keep);
void TopNSigma(Candidates* c, float n);
// `coin` is the request's uniform draw for this step; XTC acts when coin <= probability.
void Xtc(Candidates* c, float probability, float threshold, int32_t min_keep, double coin);
void Temperature(Candidates* c, float t);  // t <= 0: only the best candidate remains
// Mirostat truncations (before the draw): v1 estimates the Zipf exponent from the top m tokens.
void MirostatV1(Candidates* c, float mu, int32_t n_vocab, int32_t m = 100);
void MirostatV2(Candidates* c, float mu);

}  // namespace rw::engine
