#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/check.h"

namespace rw::engine {
namespace {

double LogSumExp(std::span<const float> logits) {
  float mx = -std::numeric_limits<float>::infinity();
  for (float v : logits) mx = std::max(mx, v);
  double sum = 0;
  for (float v : logits) sum += std::exp(static_cast<double>(v) - mx);
  return mx + std::log(sum);
}

int32_t ResolveLastN(int32_t n, int32_t n_ctx) { return n < 0 ? n_ctx : n; }

DryVocab MakeDryVocab(const SamplerVocab* v) {
  DryVocab d;
  if (v) {
    d.pieces = &v->pieces;
    d.encode = v->encode;
  }
  return d;
}

}  // namespace

// Stages that give the same result before or after the grammar mask: those that change only the logits of a
// few tokens (penalties, DRY), a temperature that only scales, and stages switched off. The mask waits for
// the first other stage, so that top-k there can check tokens one by one.
bool Sampler::CommutesWithMask(SamplerStage s) const {
  const SamplingParams& p = params_;
  switch (s) {
    case SamplerStage::kPenalties:
    case SamplerStage::kDry:
      return true;
    case SamplerStage::kTopNSigma:
      return p.top_n_sigma <= 0.0f;
    case SamplerStage::kTopK:
      return p.top_k <= 0;
    case SamplerStage::kTypicalP:
      return p.typical_p >= 1.0f;
    case SamplerStage::kTopP:
      return p.top_p >= 1.0f;
    case SamplerStage::kMinP:
      return p.min_p <= 0.0f;
    case SamplerStage::kXtc:
      return p.xtc_probability <= 0.0f || p.xtc_threshold > 0.5f;
    case SamplerStage::kTemperature:
      return p.temperature > 0.0f;
  }
  return false;
}

void SamplerVocab::BuildTrie() { trie = std::make_unique<grammar::TokenTrie>(pieces); }

std::shared_ptr<const DryBreakers> PrepareDry(const SamplingParams& p, const SamplerVocab* vocab) {
  const bool on = p.dry_multiplier != 0.0f && p.dry_base >= 1.0f && p.dry_penalty_last_n != 0;
  if (!on || vocab == nullptr) return nullptr;
  return BuildDryBreakers(p.dry_sequence_breakers, MakeDryVocab(vocab));
}

Sampler::Sampler(const SamplingParams& params, const SamplerVocab* vocab, int32_t n_ctx,
                 std::shared_ptr<const grammar::Grammar> grammar, std::shared_ptr<const DryBreakers> dry)
    : params_(params),
      vocab_(vocab),
      rng_(params.seed),
      penalties_(ResolveLastN(params.repeat_last_n, n_ctx), params.repeat_penalty, params.frequency_penalty,
                 params.presence_penalty),
      dry_(params.dry_multiplier, params.dry_base, params.dry_allowed_length,
           ResolveLastN(params.dry_penalty_last_n, n_ctx), dry ? std::move(dry) : PrepareDry(params, vocab)),
      mu_(2.0f * params.mirostat_tau) {
  if (grammar) {
    REWIND_CHECK_MSG(vocab_ != nullptr && vocab_->trie != nullptr, "a grammar needs the vocabulary");
    matcher_ = std::make_unique<grammar::Matcher>(std::move(grammar));
  }
}

void Sampler::AcceptPrompt(std::span<const int32_t> prompt) {
  for (int32_t t : prompt) {
    penalties_.Accept(t);
    dry_.Accept(t);
  }
}

bool Sampler::IsEog(int32_t token) const {
  return vocab_ && std::find(vocab_->eog.begin(), vocab_->eog.end(), token) != vocab_->eog.end();
}

bool Sampler::Allowed(int32_t token) const {
  if (!matcher_) return true;
  if (IsEog(token)) return matcher_->CanEnd();
  if (token < 0 || static_cast<size_t>(token) >= vocab_->pieces.size()) return false;
  const std::string& piece = vocab_->pieces[token];
  return !piece.empty() && matcher_->Accepts(piece);
}

void Sampler::Accept(int32_t token) {
  penalties_.Accept(token);
  dry_.Accept(token);
  if (params_.mirostat != 0) {
    double p = 0;
    for (const auto& [t, q] : last_)
      if (t == token) p = q;
    if (p > 0) mu_ -= params_.mirostat_eta * (static_cast<float>(-std::log2(p)) - params_.mirostat_tau);
  }
  // The sampler only emits tokens the grammar allows; a token from elsewhere (the benchmark's synthetic
  // acceptance) is refused by Advance and leaves the grammar state as it was.
  if (matcher_ && !IsEog(token) && token >= 0 && static_cast<size_t>(token) < vocab_->pieces.size())
    matcher_->Advance(vocab_->pieces[token]);
}

void Sampler::Load(const SampleRow& row) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  n_vocab_ = row.n_vocab;
  auto& d = cand_.data;
  if (row.full()) {
    d.resize(row.logits.size());
    for (size_t i = 0; i < row.logits.size(); ++i) {
      const float v = row.logits[i];
      d[i] = {static_cast<int32_t>(i), std::isnan(v) ? kNegInf : v, 0.0};
    }
    cand_.sorted = false;
    cand_.identity = true;
    for (const LogitBias& b : params_.logit_bias)
      if (b.token >= 0 && b.token < n_vocab_) d[b.token].logit += b.bias;
    return;
  }
  // The best pairs stand for the whole row only where the first stage that changes anything keeps at most
  // CandidatesNeeded() of the best tokens (no logit_bias: that is 0).
  const int32_t need = CandidatesNeeded();
  REWIND_CHECK_MSG(need > 0, "this sampler configuration needs the full logits row");
  REWIND_CHECK_MSG(static_cast<int32_t>(row.top.size()) >= std::min(need, row.n_vocab),
                   "%zu candidate pairs for a sampler that needs %d", row.top.size(), need);
  d.resize(row.top.size());
  for (size_t i = 0; i < row.top.size(); ++i) {
    const kernels::TopLogit& t = row.top[i];
    REWIND_CHECK_MSG(t.id >= 0 && t.id < n_vocab_, "candidate id %d outside the vocabulary", t.id);
    d[i] = {t.id, std::isnan(t.logit) ? kNegInf : t.logit, 0.0};
  }
  // Not marked sorted: the first active stage (top-k, or temperature <= 0) orders them with `Better` exactly
  // as it orders the full row's survivors.
  cand_.sorted = false;
  cand_.identity = false;
}

void Sampler::MaskAll() {
  const size_t words = (static_cast<size_t>(n_vocab_) + 63) / 64;
  if (matcher_->MustEnd()) {
    mask_.assign(words, 0);
  } else {
    matcher_->AllowedMask(*vocab_->trie, &mask_);
    mask_.resize(std::max(mask_.size(), words), 0);
  }
  if (matcher_->CanEnd())
    for (int32_t t : vocab_->eog)
      if (t >= 0 && t < n_vocab_) mask_[t >> 6] |= uint64_t{1} << (t & 63);
  const auto allowed = [&](int32_t id) {
    return id >= 0 && id < n_vocab_ && (mask_[id >> 6] >> (id & 63) & 1) != 0;
  };
  auto& d = cand_.data;
  const auto usable = [](const Candidate& c) { return c.logit != -std::numeric_limits<float>::infinity(); };
  if (cand_.identity) {
    // The untouched vocabulary (d[id].id == id): gather the allowed tokens in id order, a word at a time.
    size_t n = 0;
    for (size_t w = 0; w < words; ++w) {
      for (uint64_t bits = mask_[w]; bits != 0; bits &= bits - 1) {
        const int32_t id = static_cast<int32_t>(w * 64 + static_cast<size_t>(__builtin_ctzll(bits)));
        if (id < n_vocab_ && usable(d[id])) d[n++] = d[id];
      }
    }
    d.resize(n);
  } else {
    auto last = std::stable_partition(d.begin(), d.end(),
                                      [&](const Candidate& c) { return allowed(c.id) && usable(c); });
    d.erase(last, d.end());
  }
  cand_.identity = false;
}

void Sampler::GrammarTopK(int32_t k) {
  auto& d = cand_.data;
  const size_t want = static_cast<size_t>(k);
  // Check the best m tokens one by one (selected into a copy: the candidates stay in id order for the
  // fallback). If fewer than k of them are allowed, the state allows few tokens, where the trie mask is cheap
  // (it prunes at the first rejected byte, and the matcher keeps recent masks): mask, then take the top k.
  const size_t m = std::min(d.size(), std::max<size_t>(64, 2 * want));
  top_.resize(m);
  std::partial_sort_copy(d.begin(), d.end(), top_.begin(), top_.end(), Better);
  std::vector<Candidate> kept;
  for (size_t i = 0; i < m && kept.size() < want; ++i) {
    const Candidate& c = top_[i];
    if (c.logit != -std::numeric_limits<float>::infinity() && Allowed(c.id)) kept.push_back(c);
  }
  if (kept.size() < want && m < d.size()) {
    MaskAll();
    TopK(&cand_, k);
    return;
  }
  d = std::move(kept);
  cand_.sorted = true;
  cand_.identity = false;
}

bool Sampler::GreedyShortcut() const {
  if (params_.temperature > 0.0f || params_.mirostat != 0) return false;
  // Every filter but XTC and typical-p keeps the best token, so greedy is the best allowed token.
  for (SamplerStage s : params_.stages) {
    if (s == SamplerStage::kXtc && params_.xtc_probability > 0.0f && params_.xtc_threshold <= 0.5f)
      return false;
    if (s == SamplerStage::kTypicalP && params_.typical_p < 1.0f) return false;
  }
  return true;
}

// Whether the stage changes anything at all (a switched-off stage, or a temperature of exactly 1, whose
// division changes no bit, leaves the candidates as they are).
bool Sampler::StageActive(SamplerStage s) const {
  const SamplingParams& p = params_;
  switch (s) {
    case SamplerStage::kPenalties:
      return penalties_.enabled();
    case SamplerStage::kDry:
      return dry_.enabled();
    case SamplerStage::kTemperature:
      return p.temperature != 1.0f;
    default:
      return !CommutesWithMask(s);
  }
}

int32_t Sampler::CandidatesNeeded() const {
  const SamplingParams& p = params_;
  if (matcher_ || !p.logit_bias.empty() || p.mirostat != 0) return 0;
  if (GreedyShortcut()) {
    // Only the penalties and DRY of the chain run before the best token is taken, over the whole vocabulary.
    for (SamplerStage s : p.stages)
      if ((s == SamplerStage::kPenalties || s == SamplerStage::kDry) && StageActive(s)) return 0;
    return 1;
  }
  for (SamplerStage s : p.stages) {
    if (!StageActive(s)) continue;
    if (s == SamplerStage::kTopK) return p.top_k <= kernels::kMaxTopLogits ? p.top_k : 0;
    if (s == SamplerStage::kTemperature && p.temperature <= 0.0f) return 1;
    return 0;
  }
  return 0;
}

void Sampler::ApplyStage(SamplerStage stage, double xtc_coin) {
  switch (stage) {
    case SamplerStage::kPenalties:
      penalties_.Apply(&cand_);
      break;
    case SamplerStage::kDry:
      dry_.Apply(&cand_);
      break;
    case SamplerStage::kTopNSigma:
      TopNSigma(&cand_, params_.top_n_sigma);
      break;
    case SamplerStage::kTopK:
      TopK(&cand_, params_.top_k);
      break;
    case SamplerStage::kTypicalP:
      TypicalP(&cand_, params_.typical_p, params_.min_keep);
      break;
    case SamplerStage::kTopP:
      TopP(&cand_, params_.top_p, params_.min_keep);
      break;
    case SamplerStage::kMinP:
      MinP(&cand_, params_.min_p, params_.min_keep);
      break;
    case SamplerStage::kXtc:
      Xtc(&cand_, params_.xtc_probability, params_.xtc_threshold, params_.min_keep, xtc_coin);
      break;
    case SamplerStage::kTemperature:
      Temperature(&cand_, params_.temperature);
      break;
  }
}

std::vector<std::pair<int32_t, double>> Sampler::Distribution(const SampleRow& row) {
  Load(row);
  const bool xtc_on = params_.xtc_probability > 0.0f && params_.xtc_threshold <= 0.5f;
  const double coin = xtc_on && params_.mirostat == 0 ? Uniform() : 1.0;
  bool masked = matcher_ == nullptr;
  if (params_.mirostat != 0) {
    // llama.cpp's mirostat chain: logit_bias, temperature, mirostat (the `stages` do not apply).
    if (!masked) MaskAll();
    Temperature(&cand_, params_.temperature);
    if (params_.mirostat == 1)
      MirostatV1(&cand_, mu_, n_vocab_);
    else
      MirostatV2(&cand_, mu_);
  } else if (GreedyShortcut()) {
    for (SamplerStage s : params_.stages)
      if (s == SamplerStage::kPenalties || s == SamplerStage::kDry) ApplyStage(s, coin);
    if (!masked) GrammarTopK(1);
    Temperature(&cand_, 0.0f);
  } else {
    for (SamplerStage s : params_.stages) {
      if (!masked && !CommutesWithMask(s)) {
        if (s == SamplerStage::kTopK && params_.top_k > 0) {
          GrammarTopK(params_.top_k);
          masked = true;
          continue;
        }
        MaskAll();
        masked = true;
      }
      ApplyStage(s, coin);
    }
    if (!masked) MaskAll();
  }
  auto& d = cand_.data;
  last_.clear();
  if (d.empty()) {
    // Nothing allowed (a grammar with no way forward): end the generation.
    int32_t eog = vocab_ && !vocab_->eog.empty() ? vocab_->eog[0]
                  : row.full()                       ? Argmax(row.logits)
                                                     : row.top[0].id;  // the pairs' order is Argmax's
    last_.push_back({eog, 1.0});
    return last_;
  }
  Softmax(&cand_);
  last_.reserve(d.size());
  for (const auto& c : d)
    if (c.p > 0) last_.push_back({c.id, c.p});
  return last_;
}

double Sampler::Uniform() { return std::uniform_real_distribution<double>(0.0, 1.0)(rng_); }

int32_t Sampler::Sample(const SampleRow& row) {
  auto dist = Distribution(row);
  if (dist.size() == 1) return dist[0].first;
  double r = Uniform();
  double acc = 0;
  for (const auto& [tok, p] : dist) {
    acc += p;
    if (r < acc) return tok;
  }
  return dist.back().first;
}

int32_t Sampler::SpeculativeStep(const SampleRow& row, int32_t draft, bool* accepted) {
  auto dist = Distribution(row);
  double p_draft = 0;
  for (const auto& [tok, p] : dist)
    if (tok == draft) p_draft = p;
  // A one-token distribution (greedy) consumes no randomness, so the result equals plain decoding.
  if (dist.size() == 1 ? p_draft > 0 : (p_draft > 0 && Uniform() < p_draft)) {
    *accepted = true;
    return draft;
  }
  *accepted = false;
  if (dist.size() == 1) return dist[0].first;
  double rest = 1.0 - p_draft;
  double r = Uniform() * rest;
  double acc = 0;
  int32_t last = dist[0].first == draft && dist.size() > 1 ? dist[1].first : dist[0].first;
  for (const auto& [tok, p] : dist) {
    if (tok == draft) continue;
    acc += p;
    last = tok;
    if (r < acc) return tok;
  }
  return last;
}

int32_t Sampler::Argmax(std::span<const float> logits) {
  int32_t best = 0;
  float best_v = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < logits.size(); ++i)
    if (logits[i] > best_v) {  // false for NaN: it never wins, as -inf would not
      best = static_cast<int32_t>(i);
      best_v = logits[i];
    }
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

}  // namespace rw::engine
