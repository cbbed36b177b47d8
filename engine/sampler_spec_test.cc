// Speculative sampling stays exact at T > 0 with every sampler: the distribution of generated sequences is
// the same with and without speculation. Each configuration generates many short sequences from a toy "model"
// (logits a fixed function of the context) both ways over a fixed set of seeds and compares the two
// histograms with a chi-square test; a deliberately wrong verifier shows the test has the power to fail.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <map>

#include "base/hash.h"
#include "engine/sampler.h"
#include "grammar/grammar.h"

namespace rw::engine {
namespace {

constexpr int32_t kVocab = 7;  // tokens 0..5 text, 6 end of generation
constexpr int kLength = 3;     // tokens per sequence
constexpr int kRuns = 6000;    // sequences per side

// The toy model: logits from a hash of the last two tokens (peaked enough that drafts are often accepted).
std::vector<float> Logits(const std::vector<int32_t>& ctx) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = ctx.size() >= 2 ? ctx.size() - 2 : 0; i < ctx.size(); ++i)
    h = (h ^ (ctx[i] + 1)) * 1099511628211ull;
  std::vector<float> l(kVocab);
  for (int32_t t = 0; t < kVocab; ++t) {
    h = h * 6364136223846793005ull + 1442695040888963407ull;
    l[t] = static_cast<float>((h >> 40) % 1000) / 250.0f - 2.0f;
  }
  return l;
}

// A deterministic drafter that is right sometimes: the model's argmax of a slightly different context.
int32_t Draft(const std::vector<int32_t>& ctx) {
  std::vector<float> l = Logits(ctx);
  int32_t best = 0;
  for (int32_t t = 1; t < kVocab; ++t)
    if (l[t] > l[best]) best = t;
  return ctx.size() % 3 == 0 ? (best + 1) % kVocab : best;
}

struct Setup {
  SamplingParams params;
  std::string grammar;  // GBNF over the toy pieces, "" = none
};

const SamplerVocab& Vocab() {
  static const SamplerVocab* v = [] {
    auto* x = new SamplerVocab();
    x->pieces = {"a", "b", "c", ":", "\n", "ab", ""};
    x->eog = {6};
    x->encode = [](std::string_view s) {
      std::vector<int32_t> out;
      for (char c : s) out.push_back(c == 'a' ? 0 : c == 'b' ? 1 : c == 'c' ? 2 : c == ':' ? 3 : 4);
      return out;
    };
    x->BuildTrie();
    return x;
  }();
  return *v;
}

std::unique_ptr<Sampler> Make(const Setup& s, uint64_t seed) {
  SamplingParams p = s.params;
  p.seed = seed;
  std::shared_ptr<const grammar::Grammar> g;
  if (!s.grammar.empty()) g = *grammar::ParseGbnf(s.grammar);
  auto smp = std::make_unique<Sampler>(p, &Vocab(), 64, g);
  smp->AcceptPrompt(std::vector<int32_t>{0, 1, 2, 0, 1});
  return smp;
}

// A sequence key: the generated tokens (the end token stops the sequence early).
int Key(const std::vector<int32_t>& gen) {
  int k = 0;
  for (int i = 0; i < kLength; ++i)
    k = k * (kVocab + 1) + (i < static_cast<int>(gen.size()) ? gen[i] + 1 : 0);
  return k;
}

int Plain(const Setup& s, uint64_t seed) {
  auto smp = Make(s, seed);
  std::vector<int32_t> ctx = {0, 1, 2, 0, 1}, gen;
  while (static_cast<int>(gen.size()) < kLength) {
    int32_t t = smp->Sample(Logits(ctx));
    smp->Accept(t);
    gen.push_back(t);
    if (t == 6) break;
    ctx.push_back(t);
  }
  return Key(gen);
}

// As the engine's verify round: draft up to 2 tokens, verify each row in order, the row after the last
// accepted draft samples normally. `broken`: accept every draft (the wrong verifier of the power check).
int Speculative(const Setup& s, uint64_t seed, bool broken) {
  auto smp = Make(s, seed);
  std::vector<int32_t> ctx = {0, 1, 2, 0, 1}, gen;
  auto emit = [&](int32_t t) {
    smp->Accept(t);
    gen.push_back(t);
    ctx.push_back(t);
    return t != 6 && static_cast<int>(gen.size()) < kLength;
  };
  bool alive = true;
  while (alive) {
    std::vector<int32_t> draft, dctx = ctx;
    for (int i = 0; i < 2; ++i) {
      draft.push_back(Draft(dctx));
      dctx.push_back(draft.back());
    }
    bool all = true;
    for (int32_t d : draft) {
      bool ok = false;
      int32_t t =
          broken ? (smp->Distribution(Logits(ctx)), ok = true, d) : smp->SpeculativeStep(Logits(ctx), d, &ok);
      alive = emit(t);
      if (!ok || !alive) {
        all = ok;
        break;
      }
    }
    if (alive && all) alive = emit(smp->Sample(Logits(ctx)));
  }
  return Key(gen);
}

// Two-sample chi-square statistic over the categories either side saw, and its degrees of freedom.
std::pair<double, int> ChiSquare(const std::map<int, int>& a, const std::map<int, int>& b) {
  std::map<int, std::pair<int, int>> all;
  for (const auto& [k, n] : a) all[k].first = n;
  for (const auto& [k, n] : b) all[k].second = n;
  double chi = 0;
  for (const auto& [k, ab] : all) {
    const double d = ab.first - ab.second;
    chi += d * d / (ab.first + ab.second);
  }
  return {chi, static_cast<int>(all.size()) - 1};
}

// Fails (p < about 1e-4) when the histograms differ.
bool SameDistribution(const Setup& s, bool broken, std::string* detail) {
  std::map<int, int> plain, spec;
  for (uint64_t seed = 1; seed <= kRuns; ++seed) {
    plain[Plain(s, seed)]++;
    spec[Speculative(s, seed + 1000003, broken)]++;
  }
  auto [chi, dof] = ChiSquare(plain, spec);
  const double limit = dof + 4.0 * std::sqrt(2.0 * dof) + 10.0;
  *detail = "chi2 " + std::to_string(chi) + " dof " + std::to_string(dof) + " limit " + std::to_string(limit);
  return chi < limit;
}

std::vector<std::pair<std::string, Setup>> Setups() {
  std::vector<std::pair<std::string, Setup>> out;
  auto add = [&](const std::string& name, const std::function<void(SamplingParams*)>& f, std::string g = "") {
    Setup s;
    s.params.temperature = 1.0f;
    f(&s.params);
    s.grammar = std::move(g);
    out.push_back({name, s});
  };
  add("plain", [](SamplingParams*) {});
  add("llama-server defaults", [](SamplingParams* p) {
    p->top_k = 40;
    p->top_p = 0.95f;
    p->min_p = 0.05f;
    p->temperature = 0.8f;
  });
  add("top-k 3, top-p 0.8, min-p 0.1, temperature 1.5", [](SamplingParams* p) {
    p->top_k = 3;
    p->top_p = 0.8f;
    p->min_p = 0.1f;
    p->temperature = 1.5f;
  });
  add("penalties", [](SamplingParams* p) {
    p->repeat_penalty = 1.5f;
    p->frequency_penalty = 0.4f;
    p->presence_penalty = 0.3f;
  });
  add("dry", [](SamplingParams* p) {
    p->dry_multiplier = 0.8f;
    p->dry_allowed_length = 1;
    p->dry_sequence_breakers = {"\n", ":"};
  });
  add("xtc", [](SamplingParams* p) {
    p->xtc_probability = 0.5f;
    p->xtc_threshold = 0.1f;
  });
  add("typical-p and top-n-sigma", [](SamplingParams* p) {
    p->typical_p = 0.7f;
    p->top_n_sigma = 1.5f;
  });
  add("mirostat v1", [](SamplingParams* p) {
    p->mirostat = 1;
    p->mirostat_tau = 2.0f;
  });
  add("mirostat v2", [](SamplingParams* p) {
    p->mirostat = 2;
    p->mirostat_tau = 2.0f;
  });
  add("logit bias", [](SamplingParams* p) { p->logit_bias = {{0, 1.5f}, {3, -INFINITY}}; });
  add(
      "grammar", [](SamplingParams* p) { p->top_k = 4; }, R"(root ::= ("a" | "b" | "ab")+ "c"? "\n")");
  add(
      "grammar without top-k", [](SamplingParams*) {}, R"(root ::= [ab:] ( "c" | "ab" )*)");
  return out;
}

TEST(SpeculativeSampling, KeepsTheDistributionOfEverySampler) {
  for (const auto& [name, setup] : Setups()) {
    std::string detail;
    EXPECT_TRUE(SameDistribution(setup, /*broken=*/false, &detail)) << name << ": " << detail;
  }
}

TEST(SpeculativeSampling, TheTestDetectsAVerifierThatAcceptsEveryDraft) {
  std::string detail;
  EXPECT_FALSE(SameDistribution(Setups()[0].second, /*broken=*/true, &detail)) << detail;
}

}  // namespace
}  // namespace rw::engine
