// Sampling from a row's best K (logit, id) pairs (the forward's top-k, docs/api.md "Sampling") against sampling
// from the full row: CandidatesNeeded() per configuration, and for every configuration where it is > 0 the same
// tokens, the same speculative verdicts and the same RNG draws, over many seeds and rows with ties, -inf, NaN
// and -0.0.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "engine/sampler.h"
#include "grammar/grammar.h"
#include "kernels/top_logits.h"

namespace rw::engine {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

SamplingParams Temp(float t, int32_t top_k = 0) {
  SamplingParams p;
  p.temperature = t;
  p.top_k = top_k;
  return p;
}

int32_t Needed(const SamplingParams& p) { return Sampler(p).CandidatesNeeded(); }

TEST(SamplerCandidates, CandidatesNeededFollowsTheChain) {
  EXPECT_EQ(Needed(Temp(0.8f)), 0) << "temperature alone reads the whole distribution";
  EXPECT_EQ(Needed(Temp(0.0f)), 1);
  EXPECT_EQ(Needed(Temp(-1.0f)), 1);
  EXPECT_EQ(Needed(Temp(0.0f, 40)), 1) << "greedy keeps the best token whatever top-k keeps";
  EXPECT_EQ(Needed(Temp(0.8f, 1)), 1);
  EXPECT_EQ(Needed(Temp(0.8f, 40)), 40);
  EXPECT_EQ(Needed(Temp(0.8f, 128)), 128);
  EXPECT_EQ(Needed(Temp(0.8f, 129)), 0) << "more than the forward hands out";
  EXPECT_EQ(Needed(Temp(1.0f)), 0) << "no active stage: the whole distribution";

  SamplingParams p = Temp(0.8f, 40);
  p.top_p = 0.9f;
  p.min_p = 0.05f;
  p.typical_p = 0.95f;
  p.xtc_probability = 0.5f;
  p.top_n_sigma = -1.0f;
  EXPECT_EQ(Needed(p), 40) << "stages after top-k see only its survivors";
  p.top_n_sigma = 1.0f;  // before top-k in the default order
  EXPECT_EQ(Needed(p), 0);

  // Penalties and DRY: in the default order they come first (arbitrary history tokens change).
  for (int which = 0; which < 4; ++which) {
    SamplingParams q = Temp(0.8f, 40);
    if (which == 0) q.repeat_penalty = 1.1f;
    if (which == 1) q.presence_penalty = 0.5f;
    if (which == 2) q.frequency_penalty = -0.5f;
    if (which == 3) q.dry_multiplier = 0.8f;
    EXPECT_EQ(Needed(q), 0) << which;
    q.temperature = 0.0f;
    EXPECT_EQ(Needed(q), 0) << "greedy with penalties, " << which;
    q.repeat_last_n = 0;
    q.dry_penalty_last_n = 0;
    EXPECT_EQ(Needed(q), 1) << "a window of 0 switches them off, " << which;
  }
  SamplingParams after = Temp(0.8f, 40);
  after.repeat_penalty = 1.3f;
  after.stages = {SamplerStage::kTopK, SamplerStage::kPenalties, SamplerStage::kTemperature};
  EXPECT_EQ(Needed(after), 40) << "penalties after top-k change survivors only";

  // Greedy with XTC or typical-p is no shortcut: the chain decides.
  SamplingParams x = Temp(0.0f);
  x.xtc_probability = 0.5f;
  EXPECT_EQ(Needed(x), 0) << "XTC can drop the best token";
  x.top_k = 40;
  EXPECT_EQ(Needed(x), 40);
  SamplingParams ty = Temp(0.0f);
  ty.typical_p = 0.9f;
  EXPECT_EQ(Needed(ty), 0);
  ty.stages = {SamplerStage::kTemperature, SamplerStage::kTypicalP};
  EXPECT_EQ(Needed(ty), 1) << "a temperature <= 0 first keeps the best token only";

  // A temperature of exactly 1 changes no bit; any other scales before top-k (rounding may tie two logits).
  SamplingParams t1 = Temp(1.0f, 40);
  t1.stages = {SamplerStage::kTemperature, SamplerStage::kTopK};
  EXPECT_EQ(Needed(t1), 40);
  t1.temperature = 0.7f;
  EXPECT_EQ(Needed(t1), 0);

  SamplingParams bias = Temp(0.8f, 40);
  bias.logit_bias = {{3, -kInf}};
  EXPECT_EQ(Needed(bias), 0);
  SamplingParams miro = Temp(0.8f, 40);
  miro.mirostat = 2;
  EXPECT_EQ(Needed(miro), 0);
  miro.mirostat = 1;
  EXPECT_EQ(Needed(miro), 0);

  SamplerVocab v;
  v.pieces = {"a", "b", "{", "}", "", "c"};
  v.eog = {4};
  v.BuildTrie();
  auto g = grammar::ParseGbnf(R"(root ::= "{" [ab]+ "}")");
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(Sampler(Temp(0.0f), &v, 64, *g).CandidatesNeeded(), 0);
  EXPECT_EQ(Sampler(Temp(0.8f, 40), &v, 64, *g).CandidatesNeeded(), 0);
}

// A row with ties (values on a coarse grid), -inf, NaN and -0.0 mixed in.
std::vector<float> RandomRow(std::mt19937& rng, int32_t n_vocab) {
  std::vector<float> row(static_cast<size_t>(n_vocab));
  std::uniform_real_distribution<float> u(-6.0f, 6.0f);
  for (auto& x : row) {
    const uint32_t r = rng() % 100;
    if (r < 3) x = -kInf;
    else if (r < 5) x = std::numeric_limits<float>::quiet_NaN();
    else if (r < 7) x = -0.0f;
    else if (r < 40) x = std::round(u(rng) * 4.0f) / 4.0f;  // ties
    else x = u(rng);
  }
  if (rng() % 4 == 0) row[rng() % row.size()] = std::numeric_limits<float>::quiet_NaN();  // sometimes first
  return row;
}

// The row as the sampler with candidates sees it: the row's best `k` pairs (the forward's selection).
std::vector<kernels::TopLogit> Pairs(const std::vector<float>& row, int32_t k) {
  std::vector<kernels::TopLogit> out(std::min<size_t>(row.size(), static_cast<size_t>(k)));
  kernels::TopLogits(row, k, out.data());
  return out;
}

// Runs `steps` steps of two samplers with the same parameters, one on full rows and one on the rows' best
// `k_of(need)` pairs (or, with `mask_beyond` > 0, on full rows whose entries outside the best `mask_beyond` are
// -inf: the tool that shows this comparison notices too few candidates). Plain steps and speculative steps
// alternate; both emit and Accept the same token. Returns the number of steps whose token, verdict or RNG draw
// differed.
int Mismatches(const SamplingParams& p, int32_t n_vocab, uint32_t seed, int steps, int32_t extra_pairs,
               int32_t mask_beyond = 0) {
  Sampler full(p), cand(p);
  const int32_t need = full.CandidatesNeeded();
  EXPECT_GT(need, 0);
  std::mt19937 rng(seed);
  std::vector<int32_t> prompt(20);
  for (auto& t : prompt) t = static_cast<int32_t>(rng() % static_cast<uint32_t>(n_vocab));
  full.AcceptPrompt(prompt);
  cand.AcceptPrompt(prompt);
  int bad = 0;
  for (int s = 0; s < steps; ++s) {
    const std::vector<float> row = RandomRow(rng, n_vocab);
    std::vector<kernels::TopLogit> pairs;
    std::vector<float> masked;
    SampleRow crow;
    if (mask_beyond > 0) {
      masked.assign(row.size(), -kInf);
      for (const auto& t : Pairs(row, mask_beyond)) masked[t.id] = t.logit;
      crow = SampleRow::Full(masked);
    } else {
      pairs = Pairs(row, std::min(need + extra_pairs, kernels::kMaxTopLogits));
      crow = SampleRow::Top(pairs, n_vocab);
    }
    int32_t a, b;
    if (s % 3 == 2) {
      // A draft from the top of the row or from anywhere in the vocabulary.
      const int32_t draft = rng() % 2 ? Pairs(row, 3)[rng() % 3].id : static_cast<int32_t>(rng() % n_vocab);
      bool ok_a = false, ok_b = false;
      a = full.SpeculativeStep(row, draft, &ok_a);
      b = cand.SpeculativeStep(crow, draft, &ok_b);
      if (ok_a != ok_b) ++bad;
    } else {
      a = full.Sample(row);
      b = cand.Sample(crow);
    }
    if (a != b) ++bad;
    full.Accept(a);
    cand.Accept(a);
  }
  if (full.Uniform() != cand.Uniform()) ++bad;  // the same draws, so the RNGs stand at the same place
  return bad;
}

std::vector<SamplingParams> CandidateConfigs() {
  std::vector<SamplingParams> out;
  out.push_back(Temp(0.0f));
  out.push_back(Temp(0.0f, 40));
  for (int32_t k : {1, 40, 128}) {
    out.push_back(Temp(0.8f, k));
    out.push_back(Temp(1.5f, k));
  }
  SamplingParams tp = Temp(0.8f, 40);
  tp.top_p = 0.9f;
  out.push_back(tp);
  SamplingParams mp = Temp(0.7f, 64);
  mp.min_p = 0.05f;
  mp.top_p = 0.95f;  // the server's defaults
  out.push_back(mp);
  SamplingParams rest = Temp(1.2f, 100);
  rest.typical_p = 0.9f;
  rest.xtc_probability = 0.5f;
  rest.xtc_threshold = 0.05f;
  out.push_back(rest);
  SamplingParams pen = Temp(0.9f, 40);
  pen.repeat_penalty = 1.3f;
  pen.presence_penalty = 0.4f;
  pen.stages = {SamplerStage::kTopK, SamplerStage::kPenalties, SamplerStage::kMinP, SamplerStage::kTemperature};
  pen.min_p = 0.1f;
  out.push_back(pen);
  SamplingParams greedy_xtc = Temp(0.0f, 20);
  greedy_xtc.xtc_probability = 0.7f;
  out.push_back(greedy_xtc);
  SamplingParams t1 = Temp(1.0f, 50);
  t1.stages = {SamplerStage::kTemperature, SamplerStage::kTopK, SamplerStage::kTopP};
  t1.top_p = 0.8f;
  out.push_back(t1);
  return out;
}

TEST(SamplerCandidates, CandidatesGiveTheFullRowsTokensVerdictsAndDraws) {
  int configs = 0, runs = 0;
  for (const SamplingParams& base : CandidateConfigs()) {
    ASSERT_GT(Needed(base), 0) << "config " << configs;
    for (int32_t n_vocab : {60, 3000}) {  // 60 < 128: fewer pairs than top-k asks for
      for (uint32_t seed = 0; seed < 12; ++seed) {
        SamplingParams p = base;
        p.seed = 1000 + seed;
        const int32_t extra = seed % 3 == 0 ? 0 : static_cast<int32_t>(seed * 7);  // the batch's K may be larger
        EXPECT_EQ(Mismatches(p, n_vocab, seed, 30, extra), 0)
            << "config " << configs << " n_vocab " << n_vocab << " seed " << seed << " extra " << extra;
        ++runs;
      }
    }
    ++configs;
  }
  std::printf("candidates vs full rows: %d configurations, %d runs of 30 steps\n", configs, runs);
}

// The comparison above notices a K that is too small: the same rows cut to fewer candidates than top-k keeps
// give other tokens, while cut to exactly top-k's count they give the same.
TEST(SamplerCandidates, TheComparisonDetectsTooFewCandidates) {
  SamplingParams p = Temp(1.5f, 40);
  p.seed = 5;
  EXPECT_EQ(Mismatches(p, 3000, 1, 60, 0, /*mask_beyond=*/40), 0);
  EXPECT_GT(Mismatches(p, 3000, 1, 60, 0, /*mask_beyond=*/20), 0);
}

TEST(SamplerCandidates, TooFewPairsOrAConfigurationThatNeedsTheRowAbort) {
  std::mt19937 rng(3);
  const std::vector<float> row = RandomRow(rng, 500);
  const auto pairs = Pairs(row, 39);
  EXPECT_DEATH(Sampler(Temp(0.8f, 40)).Sample(SampleRow::Top(pairs, 500)), "candidate pairs");
  EXPECT_DEATH(Sampler(Temp(0.8f, 0)).Sample(SampleRow::Top(pairs, 500)), "full logits row");
}

TEST(SamplerCandidates, NanCountsAsMinusInfinityOnTheFullRowToo) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> row = {nan, 1.0f, 3.0f, nan, 3.0f};
  EXPECT_EQ(Sampler::Argmax(row), 2);
  Sampler greedy(Temp(0.0f));
  EXPECT_EQ(greedy.Sample(row), 2);
  std::vector<float> all_nan = {nan, nan, nan};
  EXPECT_EQ(Sampler::Argmax(all_nan), 0);
  // A sampled row: NaN entries get probability 0, never a NaN distribution.
  Sampler s(Temp(0.8f, 3));
  auto d = s.Distribution(row);
  double sum = 0;
  for (const auto& [t, q] : d) {
    EXPECT_TRUE(t == 1 || t == 2 || t == 4) << t;
    sum += q;
  }
  EXPECT_NEAR(sum, 1.0, 1e-12);
}

}  // namespace
}  // namespace rw::engine
