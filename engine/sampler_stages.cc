#include "engine/sampler_stages.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace rw::engine {

void SortPrefix(Candidates* c, size_t n) {
  auto& d = c->data;
  n = std::min(n, d.size());
  if (c->sorted) return;
  if (n == d.size()) {
    std::sort(d.begin(), d.end(), Better);
    c->sorted = true;
  } else {
    std::partial_sort(d.begin(), d.begin() + static_cast<std::ptrdiff_t>(n), d.end(), Better);
  }
  c->identity = false;
}

void Softmax(Candidates* c) {
  auto& d = c->data;
  if (d.empty()) return;
  float mx = d[0].logit;
  for (const auto& x : d) mx = std::max(mx, x.logit);
  double sum = 0;
  for (auto& x : d) {
    x.p = std::exp(static_cast<double>(x.logit) - mx);
    sum += x.p;
  }
  for (auto& x : d) x.p /= sum;
}

void TopK(Candidates* c, int32_t k) {
  if (k <= 0 || static_cast<size_t>(k) >= c->data.size()) {
    if (k > 0) SortPrefix(c, c->data.size());
    return;
  }
  SortPrefix(c, static_cast<size_t>(k));
  c->data.resize(static_cast<size_t>(k));
  c->sorted = true;
}

void TopP(Candidates* c, float p, int32_t min_keep) {
  if (p >= 1.0f || c->data.empty()) return;
  Softmax(c);
  auto& d = c->data;
  // Sort a prefix that grows (256, then x8) until it holds mass p: the vocabulary is not sorted in the usual
  // case where a few hundred tokens carry the mass.
  size_t sorted_n = c->sorted ? d.size() : std::min<size_t>(256, d.size());
  SortPrefix(c, sorted_n);
  double cum = 0;
  size_t keep = d.size();
  for (size_t i = 0; i < d.size(); ++i) {
    if (i == sorted_n) {
      sorted_n = std::min(d.size(), sorted_n * 8);
      // Only the unsorted tail needs ordering: the sorted head holds the best i candidates already.
      std::partial_sort(d.begin() + static_cast<std::ptrdiff_t>(i),
                        d.begin() + static_cast<std::ptrdiff_t>(sorted_n), d.end(), Better);
    }
    cum += d[i].p;
    if (cum >= p && static_cast<int32_t>(i + 1) >= min_keep) {
      keep = i + 1;
      break;
    }
  }
  d.resize(keep);
  c->sorted = true;
  c->identity = false;
}

void MinP(Candidates* c, float p, int32_t min_keep) {
  auto& d = c->data;
  if (p <= 0.0f || d.empty()) return;
  float mx = d[0].logit;
  for (const auto& x : d) mx = std::max(mx, x.logit);
  const float floor = mx + std::log(p);  // p_i >= p * p_max
  size_t n = 0;
  for (const auto& x : d) n += x.logit >= floor;
  if (static_cast<int32_t>(n) >= min_keep) {
    auto end =
        std::stable_partition(d.begin(), d.end(), [&](const Candidate& x) { return x.logit >= floor; });
    d.erase(end, d.end());
  } else {
    SortPrefix(c, static_cast<size_t>(min_keep));
    d.resize(std::min(d.size(), static_cast<size_t>(min_keep)));
  }
  c->identity = false;
}

void TypicalP(Candidates* c, float p, int32_t min_keep) {
  if (p >= 1.0f || c->data.empty()) return;
  SortPrefix(c, c->data.size());
  Softmax(c);
  auto& d = c->data;
  double entropy = 0;
  for (const auto& x : d)
    if (x.p > 0) entropy -= x.p * std::log(x.p);
  std::vector<double> score(d.size());
  for (size_t i = 0; i < d.size(); ++i) score[i] = std::fabs(-std::log(d[i].p) - entropy);
  std::vector<size_t> idx(d.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return score[a] < score[b]; });
  double cum = 0;
  size_t keep = idx.size();
  for (size_t i = 0; i < idx.size(); ++i) {
    cum += d[idx[i]].p;
    if (cum > p && (min_keep == 0 || static_cast<int32_t>(i + 1) >= min_keep)) {
      keep = i + 1;
      break;
    }
  }
  std::vector<Candidate> out(keep);
  for (size_t i = 0; i < keep; ++i) out[i] = d[idx[i]];
  d = std::move(out);
  c->sorted = false;
  c->identity = false;
}

void TopNSigma(Candidates* c, float n) {
  auto& d = c->data;
  if (n <= 0.0f || d.size() <= 1) return;
  float mx = -INFINITY;
  double sum = 0;
  size_t valid = 0;
  for (const auto& x : d) {
    if (x.logit == -INFINITY) continue;
    mx = std::max(mx, x.logit);
    sum += x.logit;
    ++valid;
  }
  if (valid == 0) return;
  const double mean = sum / static_cast<double>(valid);
  double acc = 0;
  for (const auto& x : d)
    if (x.logit != -INFINITY) acc += (x.logit - mean) * (x.logit - mean);
  const double sd = std::sqrt(acc / static_cast<double>(valid));
  const double floor = mx - n * sd;
  auto end = std::stable_partition(d.begin(), d.end(), [&](const Candidate& x) { return x.logit >= floor; });
  d.erase(end, d.end());
  c->identity = false;
}

void Xtc(Candidates* c, float probability, float threshold, int32_t min_keep, double coin) {
  if (probability <= 0.0f || threshold > 0.5f || c->data.size() < 2 || coin > probability) return;
  SortPrefix(c, c->data.size());
  Softmax(c);
  auto& d = c->data;
  size_t last = 0;  // the last (least likely) of the leading tokens at or above the threshold
  for (size_t i = 0; i < d.size() && d[i].p >= threshold; ++i) last = i;
  if (last > 0 && static_cast<int32_t>(d.size() - last) >= min_keep)
    d.erase(d.begin(), d.begin() + static_cast<std::ptrdiff_t>(last));
  c->identity = false;
}

void Temperature(Candidates* c, float t) {
  auto& d = c->data;
  if (d.empty()) return;
  if (t <= 0.0f) {
    auto best = std::min_element(d.begin(), d.end(), Better);
    Candidate b = *best;
    d.assign(1, b);
    c->sorted = true;
    c->identity = false;
    return;
  }
  for (auto& x : d) x.logit /= t;
}

void MirostatV1(Candidates* c, float mu, int32_t n_vocab, int32_t m) {
  if (c->data.size() < 2) return;
  SortPrefix(c, c->data.size());
  Softmax(c);
  auto& d = c->data;
  double sum_tb = 0, sum_tt = 0;
  for (size_t i = 0; i + 1 < static_cast<size_t>(m) && i + 1 < d.size(); ++i) {
    const double t = std::log(static_cast<double>(i + 2) / static_cast<double>(i + 1));
    const double b = std::log(d[i].p / d[i + 1].p);
    sum_tb += t * b;
    sum_tt += t * t;
  }
  const double s_hat = sum_tb / sum_tt;
  const double eps = s_hat - 1;
  const double k =
      std::pow((eps * std::pow(2.0, mu)) / (1 - std::pow(static_cast<double>(n_vocab), -eps)), 1 / s_hat);
  // A NaN or huge k (flat distributions) keeps everything; at least one token stays.
  size_t keep = d.size();
  if (std::isfinite(k))
    keep = std::clamp<size_t>(k >= 1 ? static_cast<size_t>(std::min(k, 1e12)) : 1, 1, d.size());
  d.resize(keep);
}

void MirostatV2(Candidates* c, float mu) {
  if (c->data.empty()) return;
  Softmax(c);
  auto& d = c->data;
  // Drop the tokens whose surprise -log2 p exceeds mu; the most likely one always stays.
  const Candidate best = *std::min_element(d.begin(), d.end(), Better);
  auto end =
      std::stable_partition(d.begin(), d.end(), [&](const Candidate& x) { return -std::log2(x.p) <= mu; });
  d.erase(end, d.end());
  if (d.empty()) d.push_back(best);
  SortPrefix(c, d.size());
}

}  // namespace rw::engine
