#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace rw::engine {
namespace {

double LogSumExp(std::span<const float> logits) {
  float mx = -std::numeric_limits<float>::infinity();
  for (float v : logits) mx = std::max(mx, v);
  double sum = 0;
  for (float v : logits) sum += std::exp(static_cast<double>(v) - mx);
  return mx + std::log(sum);
}

}  // namespace

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {}

int32_t Sampler::Argmax(std::span<const float> logits) {
  int32_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i)
    if (logits[i] > logits[best]) best = static_cast<int32_t>(i);
  return best;
}

float Sampler::Logprob(std::span<const float> logits, int32_t token) {
  return static_cast<float>(logits[token] - LogSumExp(logits));
}

std::vector<TokenLogprob> Sampler::TopLogprobs(std::span<const float> logits, int32_t n) {
  n = std::min<int32_t>(n, static_cast<int32_t>(logits.size()));
  std::vector<int32_t> idx(logits.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int32_t>(i);
  std::partial_sort(idx.begin(), idx.begin() + n, idx.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  double lse = LogSumExp(logits);
  std::vector<TokenLogprob> out;
  out.reserve(n);
  for (int32_t i = 0; i < n; ++i) out.push_back({idx[i], static_cast<float>(logits[idx[i]] - lse)});
  return out;
}

std::vector<std::pair<int32_t, double>> Sampler::Distribution(std::span<const float> logits) {
  if (params_.temperature <= 0.0f) return {{Argmax(logits), 1.0}};
  const int32_t n_vocab = static_cast<int32_t>(logits.size());
  candidates_.resize(n_vocab);
  for (int32_t i = 0; i < n_vocab; ++i) candidates_[i] = {logits[i] / params_.temperature, i};
  auto desc = [](const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  size_t n = candidates_.size();
  if (params_.top_k > 0 && params_.top_k < n_vocab) {
    std::partial_sort(candidates_.begin(), candidates_.begin() + params_.top_k, candidates_.end(), desc);
    n = static_cast<size_t>(params_.top_k);
  } else {
    std::sort(candidates_.begin(), candidates_.end(), desc);
  }
  double mx = candidates_[0].first;
  std::vector<double> p(n);
  double sum = 0;
  for (size_t i = 0; i < n; ++i) {
    p[i] = std::exp(candidates_[i].first - mx);
    sum += p[i];
  }
  for (auto& v : p) v /= sum;
  if (params_.min_p > 0.0f) {
    double floor = p[0] * params_.min_p;
    size_t keep = 1;
    while (keep < n && p[keep] >= floor) ++keep;
    n = keep;
  }
  if (params_.top_p < 1.0f) {
    double cum = 0;
    size_t keep = 0;
    while (keep < n) {
      cum += p[keep++];
      if (cum >= params_.top_p) break;
    }
    n = std::max<size_t>(keep, 1);
  }
  double total = 0;
  for (size_t i = 0; i < n; ++i) total += p[i];
  std::vector<std::pair<int32_t, double>> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = {candidates_[i].second, p[i] / total};
  return out;
}

double Sampler::Uniform() { return std::uniform_real_distribution<double>(0.0, 1.0)(rng_); }

int32_t Sampler::Sample(std::span<const float> logits) {
  if (params_.temperature <= 0.0f) return Argmax(logits);
  auto dist = Distribution(logits);
  double r = Uniform();
  double acc = 0;
  for (const auto& [tok, p] : dist) {
    acc += p;
    if (r < acc) return tok;
  }
  return dist.back().first;
}

int32_t Sampler::SpeculativeStep(std::span<const float> logits, int32_t draft, bool* accepted) {
  auto dist = Distribution(logits);
  double p_draft = 0;
  for (const auto& [tok, p] : dist)
    if (tok == draft) p_draft = p;
  // Greedy: p_draft is 1 or 0, so no randomness is consumed and the result equals plain greedy decoding.
  if (p_draft >= 1.0 || (p_draft > 0 && Uniform() < p_draft)) {
    *accepted = true;
    return draft;
  }
  *accepted = false;
  double rest = 1.0 - p_draft;
  if (params_.temperature <= 0.0f || rest <= 0) return dist[0].first;
  double r = Uniform() * rest;
  double acc = 0;
  int32_t last = dist[0].first;
  for (const auto& [tok, p] : dist) {
    if (tok == draft) continue;
    acc += p;
    last = tok;
    if (r < acc) return tok;
  }
  return last;
}

}  // namespace rw::engine
