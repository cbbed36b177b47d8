#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "grammar/grammar.h"

namespace rw::engine {
namespace {

SamplingParams Neutral(float temperature = 1.0f) {
  SamplingParams p;
  p.temperature = temperature;
  return p;
}

std::map<int32_t, double> AsMap(const std::vector<std::pair<int32_t, double>>& d) {
  std::map<int32_t, double> m;
  for (const auto& [t, p] : d) m[t] = p;
  return m;
}

TEST(Sampler, GreedyPicksArgmaxWithLowestIdOnTies) {
  Sampler s(Neutral(0));
  std::vector<float> logits = {1, 3, 3, 2};
  EXPECT_EQ(s.Sample(logits), 1);
}

TEST(Sampler, SameSeedSameSequence) {
  SamplingParams p = Neutral();
  p.seed = 42;
  std::vector<float> logits = {0.1f, 0.2f, 0.3f, 0.4f, 0.0f, -1.0f};
  Sampler a(p), b(p);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(a.Sample(logits), b.Sample(logits));
}

TEST(Sampler, TopKOneIsGreedy) {
  SamplingParams p = Neutral(5.0f);
  p.top_k = 1;
  Sampler s(p);
  std::vector<float> logits = {0.1f, 0.9f, 0.3f};
  for (int i = 0; i < 20; ++i) EXPECT_EQ(s.Sample(logits), 1);
}

TEST(Sampler, LogprobsAreNormalised) {
  std::vector<float> logits = {1.0f, 2.0f, 3.0f};
  double sum = 0;
  for (int i = 0; i < 3; ++i) sum += std::exp(Sampler::Logprob(logits, i));
  EXPECT_NEAR(sum, 1.0, 1e-6);
  auto top = Sampler::TopLogprobs(logits, 2);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[0].token, 2);
  EXPECT_EQ(top[1].token, 1);
}

TEST(Sampler, SamplingFollowsTheDistribution) {
  SamplingParams p = Neutral();
  p.seed = 7;
  Sampler s(p);
  std::vector<float> logits = {0.0f, std::log(3.0f)};  // p = 0.25, 0.75
  int ones = 0;
  for (int i = 0; i < 4000; ++i) ones += s.Sample(logits);
  EXPECT_NEAR(ones / 4000.0, 0.75, 0.03);
}

TEST(Sampler, TemperatureComesLastAsInLlamaCpp) {
  // min-p 0.5 on the raw logits keeps tokens within log(2) of the best; a high temperature applied afterwards
  // flattens what is left but cannot bring back what min-p removed.
  SamplingParams p = Neutral(10.0f);
  p.min_p = 0.5f;
  Sampler s(p);
  std::vector<float> logits = {0.0f, -0.5f, -1.0f, -3.0f};
  auto d = AsMap(s.Distribution(logits));
  ASSERT_EQ(d.size(), 2u);
  EXPECT_NEAR(d[0] / d[1], std::exp(0.5 / 10.0), 1e-6);
}

TEST(Sampler, TopPKeepsTheSmallestPrefixReachingP) {
  SamplingParams p = Neutral();
  p.top_p = 0.7f;
  Sampler s(p);
  std::vector<float> logits(3000, -20.0f);
  logits[5] = std::log(0.5f);
  logits[9] = std::log(0.3f);
  logits[2] = std::log(0.2f);
  auto d = AsMap(s.Distribution(logits));
  ASSERT_EQ(d.size(), 2u);
  EXPECT_NEAR(d[5], 0.5 / 0.8, 1e-4);
  EXPECT_NEAR(d[9], 0.3 / 0.8, 1e-4);
}

TEST(Sampler, PenaltiesFollowLlamaCppFormulas) {
  SamplingParams p = Neutral(0);
  p.stages = {SamplerStage::kPenalties};
  p.repeat_penalty = 2.0f;
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.25f;
  p.repeat_last_n = 3;
  p.temperature = 1.0f;
  Sampler s(p);
  s.AcceptPrompt(std::vector<int32_t>{0, 1, 1, 2, 2});  // the window holds 1, 2, 2
  std::vector<float> logits = {1.0f, 4.0f, -1.0f, 0.0f};
  auto d = AsMap(s.Distribution(logits));
  // token 0: out of the window; 1: 4/2 - 0.5 - 0.25 = 1.25; 2: -1*2 - 1.0 - 0.25 = -3.25; 3: 0.
  double z = std::exp(1.0) + std::exp(1.25) + std::exp(-3.25) + 1.0;
  EXPECT_NEAR(d[0], std::exp(1.0) / z, 1e-6);
  EXPECT_NEAR(d[1], std::exp(1.25) / z, 1e-6);
  EXPECT_NEAR(d[2], std::exp(-3.25) / z, 1e-6);
}

TEST(Sampler, DryPenalisesTheTokenThatExtendsARepetition) {
  SamplingParams p = Neutral(0);
  p.dry_multiplier = 1.0f;
  p.dry_base = 2.0f;
  p.dry_allowed_length = 2;
  p.dry_sequence_breakers = {};
  // Context 5 6 7 8 5 6 7: emitting 8 would repeat "5 6 7 8" (a repeat of length 3 extended): penalty
  // 1 * 2^(3-2) = 2.
  Sampler s(p, nullptr, 64);
  s.AcceptPrompt(std::vector<int32_t>{5, 6, 7, 8, 5, 6, 7});
  std::vector<float> logits(10, 0.0f);
  logits[8] = 1.5f;
  EXPECT_NE(s.Sample(logits), 8);  // 1.5 - 2 < 0
  logits[8] = 2.5f;
  EXPECT_EQ(s.Sample(logits), 8);
}

TEST(Sampler, DrySequenceBreakersEndRepetitions) {
  SamplerVocab v;
  v.pieces = {"a", "b", "c", "\n", "x"};
  SamplingParams p = Neutral(0);
  p.dry_multiplier = 1.0f;
  p.dry_base = 2.0f;
  p.dry_allowed_length = 1;
  p.dry_sequence_breakers = {"\n"};
  Sampler s(p, &v, 64);
  s.AcceptPrompt(std::vector<int32_t>{0, 1, 3, 2, 0, 1, 3, 2});  // "ab\nc" twice: \n limits the repeat to "c"
  std::vector<float> logits = {0.5f, 0.0f, 0.0f, 0.0f, 0.0f};
  // Token 0 extends "c" (length 1 after the breaker): penalty 2^0 = 1 -> -0.5 < 0, so 1..4 win (ties:
  // lowest).
  EXPECT_EQ(s.Sample(logits), 1);
}

TEST(Sampler, LogitBiasBansAndFavours) {
  SamplingParams p = Neutral(0);
  p.logit_bias = {{2, -INFINITY}, {0, 5.0f}};
  Sampler s(p);
  std::vector<float> logits = {0.0f, 3.0f, 4.0f};
  EXPECT_EQ(s.Sample(logits), 0);
}

TEST(Sampler, XtcRemovesTheTopChoicesButTheLeastLikelyOfThem) {
  SamplingParams p = Neutral();
  p.xtc_probability = 1.0f;
  p.xtc_threshold = 0.2f;
  Sampler s(p);
  std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  auto d = AsMap(s.Distribution(logits));
  EXPECT_EQ(d.count(0), 0u);
  EXPECT_EQ(d.count(1), 1u);
  EXPECT_EQ(d.size(), 3u);
}

TEST(Sampler, TopNSigmaAndTypicalPFilter) {
  SamplingParams p = Neutral();
  p.top_n_sigma = 1.0f;
  Sampler s(p);
  std::vector<float> logits = {10.0f, 9.5f, 0.0f, 0.0f, 0.0f, 0.0f};
  EXPECT_EQ(AsMap(s.Distribution(logits)).size(), 2u);
  SamplingParams t = Neutral();
  t.typical_p = 0.5f;
  Sampler s2(t);
  // Entropy-typical tokens first: with one dominant token the dominant one is atypical... and both filters
  // keep at least one token.
  EXPECT_GE(AsMap(s2.Distribution(logits)).size(), 1u);
}

TEST(Sampler, MirostatV2TruncatesBySurpriseAndAdaptsMu) {
  SamplingParams p = Neutral();
  p.mirostat = 2;
  p.mirostat_tau = 1.0f;  // mu starts at 2: keeps tokens with p >= 1/4
  p.mirostat_eta = 2.0f;
  Sampler s(p);
  std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.2f)};
  auto d = AsMap(s.Distribution(logits));
  ASSERT_EQ(d.size(), 2u);
  s.Accept(1);  // surprise -log2(0.375) > tau: mu drops, the next step keeps fewer tokens
  auto d2 = AsMap(s.Distribution(logits));
  EXPECT_EQ(d2.size(), 1u);
}

// A vocabulary of single characters with an end token, and a grammar over it.
struct TinyVocab {
  SamplerVocab v;
  TinyVocab() {
    v.pieces = {"a", "b", "{", "}", "ab", "", "c"};
    v.eog = {5};
    v.BuildTrie();
  }
};

std::shared_ptr<const grammar::Grammar> Tiny(const std::string& text) {
  auto g = grammar::ParseGbnf(text);
  EXPECT_TRUE(g.ok());
  return *g;
}

TEST(Sampler, GrammarMasksOnlyAndNeverChangesAllowedLogits) {
  TinyVocab tv;
  SamplingParams p = Neutral();
  Sampler s(p, &tv.v, 64, Tiny(R"(root ::= "{" [ab]+ "}")"));
  std::vector<float> logits = {1.0f, 2.0f, 0.5f, 3.0f, 1.5f, 4.0f, 0.0f};
  auto d = AsMap(s.Distribution(logits));
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d.begin()->first, 2);  // only "{" may start
  s.Accept(2);
  d = AsMap(s.Distribution(logits));
  ASSERT_EQ(d.size(), 3u);  // a, b, ab
  double z = std::exp(1.0) + std::exp(2.0) + std::exp(1.5);
  EXPECT_NEAR(d[0], std::exp(1.0) / z, 1e-9);
  EXPECT_NEAR(d[4], std::exp(1.5) / z, 1e-9);
  s.Accept(4);
  s.Accept(3);
  d = AsMap(s.Distribution(logits));
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d.begin()->first, 5);  // complete: only the end token
}

TEST(Sampler, SpeculationRejectsADraftTheGrammarForbids) {
  TinyVocab tv;
  SamplingParams p = Neutral();
  Sampler s(p, &tv.v, 64, Tiny(R"(root ::= "{" [ab]+ "}")"));
  std::vector<float> logits = {0.0f, 0.0f, 0.0f, 9.0f, 0.0f, 9.0f, 9.0f};
  bool accepted = true;
  int32_t t = s.SpeculativeStep(logits, 3, &accepted);  // "}" cannot start
  EXPECT_FALSE(accepted);
  EXPECT_EQ(t, 2);
}

TEST(Sampler, LazyGrammarTopKEqualsMaskingTheWholeVocabulary) {
  // Random logits over a vocabulary where the grammar allows some tokens: top-k over the lazily checked
  // prefix must be the top-k of the masked vocabulary (the trie mask), in every state.
  SamplerVocab v;
  std::mt19937 rng(11);
  for (int i = 0; i < 3000; ++i)
    v.pieces.push_back(std::string(1, "ab{}\" "[rng() % 6]) + std::string(1, "ab}x"[rng() % 4]));
  v.pieces.push_back("");
  v.eog = {3000};
  v.BuildTrie();
  auto g = Tiny(R"(root ::= "{" ( [ab ]* | "\"" [ab]* "\"" ) "}")");
  for (int32_t k : {1, 5, 40}) {
    SamplingParams lazy = Neutral();
    lazy.top_k = k;
    SamplingParams full = lazy;
    // A min-p that removes nothing but comes first: the whole vocabulary is masked before top-k.
    full.min_p = 1e-20f;
    full.stages = {SamplerStage::kMinP, SamplerStage::kTopK, SamplerStage::kTemperature};
    Sampler a(lazy, &v, 64, g), b(full, &v, 64, g);
    std::vector<float> logits(v.pieces.size());
    for (int step = 0; step < 6; ++step) {
      for (auto& x : logits) x = std::uniform_real_distribution<float>(-3, 3)(rng);
      auto da = AsMap(a.Distribution(logits)), db = AsMap(b.Distribution(logits));
      ASSERT_EQ(da.size(), db.size()) << "k " << k << " step " << step;
      for (const auto& [t, q] : da) ASSERT_NEAR(q, db[t], 1e-12);
      int32_t pick = da.begin()->first;
      a.Accept(pick);
      b.Accept(pick);
    }
  }
}

}  // namespace
}  // namespace rw::engine
