// Constrained decoding's cost as a share of a decode step: decodes with the model (random-weight models are
// fine: the grammar, not the text, is measured), samples every step both plainly and under a JSON-schema
// grammar on the same logits, and prints the extra sampling time per token against the forward time. usage:
// grammar_bench [model.gguf [n_threads [steps]]]   (defaults: the tiny fixture, 1, 96) Plain sampling cost
// is the fastest of 3 runs per step, constrained sampling the first run (later ones would hit the matcher's
// mask cache), the decode step the median (the machine may be shared). The grammar's cost is constrained
// minus plain sampling with the same parameters. GRAMMAR_BENCH_MASK=1 prints each step's mask time to stderr.
// The goal (docs/performance.md) is <= 5% of a decode step on the 0.8B-shaped model with llama-server's
// default sampling (top-k 40); top-k 0 forces the whole-vocabulary trie mask every step and is printed as the
// worst case.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/timer.h"
#include "engine/drafter_kv.h"
#include "engine/sampler.h"
#include "grammar/json_schema.h"
#include "model/forward.h"
#include "tokenizer/tokenizer.h"

namespace {

using namespace rw;

int Fail(const std::string& what) {
  std::fprintf(stderr, "grammar_bench: %s\n", what.c_str());
  return 1;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

double Mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}

// A tool-argument-like schema: strings, enums, numbers, a nested object and an array.
const char* kSchema = R"({"type":"object","properties":{
  "city":{"type":"string","maxLength":40},"unit":{"enum":["celsius","fahrenheit"]},
  "days":{"type":"integer","minimum":1,"maximum":14},"detail":{"type":"boolean"},
  "where":{"type":"object","properties":{"lat":{"type":"number"},"lon":{"type":"number"}},"required":["lat","lon"]},
  "tags":{"type":"array","items":{"type":"string","maxLength":16},"maxItems":4}},
  "required":["city","days","where"]})";

}  // namespace

int main(int argc, char** argv) {
  std::string path = argc > 1 && argv[1][0]
                         ? argv[1]
                         : std::string(REWIND_SOURCE_DIR) + "/tests/data/golden/models/tiny-qwen35-f32.gguf";
  const int32_t threads = argc > 2 ? std::atoi(argv[2]) : 1;
  const int32_t steps = argc > 3 ? std::atoi(argv[3]) : 96;
  model::LoadOptions lo;
  lo.n_threads = threads;
  auto loaded = model::Model::Load(path, lo);
  if (!loaded.ok()) return Fail(loaded.error().ToString());
  model::Model& m = **loaded;
  auto tok = tokenizer::Tokenizer::FromGguf(m.file());
  if (!tok.ok()) return Fail(tok.error().ToString());
  double t0 = NowSeconds();
  engine::SamplerVocab vocab =
      engine::MakeSamplerVocab(std::shared_ptr<const tokenizer::Tokenizer>(std::move(*tok)));
  vocab.BuildTrie();
  const double t_vocab = NowSeconds() - t0;
  auto gbnf = grammar::JsonSchemaToGbnf(nlohmann::ordered_json::parse(kSchema));
  if (!gbnf.ok()) return Fail(gbnf.error().ToString());
  auto g = grammar::ParseGbnf(*gbnf);
  if (!g.ok()) return Fail(g.error().ToString());

  std::vector<int32_t> prompt(32);
  for (int32_t i = 0; i < 32; ++i) prompt[i] = (i * 37 + 11) % m.config().n_vocab;
  engine::internal::GrowableKv kv(m.MakeKvConfig(0, 64));
  if (!kv.Reserve(static_cast<int32_t>(prompt.size()) + steps + 1).ok()) return Fail("kv");
  auto states = model::StateStorage::Create(m.MakeStateShape(), 1);
  if (!states.ok()) return Fail(states.error().ToString());
  model::ForwardOutput out;
  model::BatchSeq b;
  b.pages = kv.pages();
  b.tokens = prompt;
  if (!m.Forward(std::span<const model::BatchSeq>(&b, 1), kv.kv(), **states, &out, {}).ok())
    return Fail("prefill");
  b.state_in = 0;

  // llama-server's defaults, and top-k 0 (the trie mask over the whole vocabulary every step).
  engine::SamplingParams params;
  params.top_k = 40;
  params.top_p = 0.95f;
  params.min_p = 0.05f;
  params.seed = 1;
  engine::SamplingParams full = params;
  full.top_k = 0;
  auto fresh = [&](const engine::SamplingParams& p, bool constrained) {
    return std::make_unique<engine::Sampler>(p, &vocab, 4096, constrained ? *g : nullptr);
  };
  auto plain = fresh(params, false), constrained = fresh(params, true), whole = fresh(full, true);
  auto plain_full = fresh(full, false);
  auto matcher = std::make_unique<grammar::Matcher>(*g);  // the trie mask alone, on the same text
  std::vector<double> t_fwd, t_plain, t_grammar, t_whole, t_plain_full, t_mask, t_reference;
  std::vector<int32_t> allowed;
  std::string text;
  int32_t restarts = 0;
  for (int32_t s = 0; s < steps; ++s) {
    const std::span<const float> row = out.Row(0);
    // Plain sampling costs are the fastest of 3 runs (the machine is shared; Distribution has no effect on
    // the state here). A grammar's cost is its first run: the matcher keeps the masks of recent states, so
    // a repeat would time a cache hit, which a decode step meets only where the state repeats.
    auto timed = [&](engine::Sampler& smp, int reps) {
      double best = 1e9;
      for (int rep = 0; rep < reps; ++rep) {
        double a = NowSeconds();
        (void)smp.Distribution(row);
        best = std::min(best, NowSeconds() - a);
      }
      return best;
    };
    t_plain.push_back(timed(*plain, 3));
    t_grammar.push_back(timed(*constrained, 1));
    t_whole.push_back(timed(*whole, 1));
    t_plain_full.push_back(timed(*plain_full, 3));
    {
      allowed.clear();
      double a = NowSeconds();
      matcher->AllowedTokens(*vocab.trie, &allowed);
      t_mask.push_back(NowSeconds() - a);
      if (std::getenv("GRAMMAR_BENCH_MASK")) std::fprintf(stderr, "%.2f ", 1e3 * t_mask.back());
      allowed.clear();
      a = NowSeconds();
      matcher->AllowedTokensReference(*vocab.trie, &allowed);
      std::sort(allowed.begin(), allowed.end());  // as the sampler needed them
      t_reference.push_back(NowSeconds() - a);
    }
    if (std::getenv("GRAMMAR_BENCH_SLOW") && t_grammar.back() > 2e-3)
      std::fprintf(stderr, "slow step %d: %.1f ms after ...%s\n", s, 1e3 * t_grammar.back(),
                   text.substr(text.size() > 60 ? text.size() - 60 : 0).c_str());
    const int32_t t = constrained->Sample(row);
    constrained->Accept(t);
    if (t < static_cast<int32_t>(vocab.pieces.size())) text += vocab.pieces[t];
    // The whole-vocabulary sampler follows the same text (its own draw is only timed).
    if (std::find(vocab.eog.begin(), vocab.eog.end(), t) != vocab.eog.end()) {
      constrained = fresh(params, true);  // the document is complete: start the next one
      whole = fresh(full, true);
      matcher = std::make_unique<grammar::Matcher>(*g);
      text += "\n";
      ++restarts;
    } else {
      whole->Accept(t);
      matcher->Advance(vocab.pieces[t]);
    }
    const int32_t next = t;
    b.pos0 = static_cast<int32_t>(prompt.size()) + s;
    b.tokens = std::span<const int32_t>(&next, 1);
    double f = NowSeconds();
    if (!m.Forward(std::span<const model::BatchSeq>(&b, 1), kv.kv(), **states, &out, {}).ok())
      return Fail("decode");
    t_fwd.push_back(NowSeconds() - f);
  }
  // The worst case: inside a length-bounded string every character leads to a new state (characters left),
  // so no mask is cached, and nearly the whole vocabulary is allowed.
  std::vector<double> t_string, t_string_reference;
  {
    auto sg = grammar::ParseGbnf(
        *grammar::JsonSchemaToGbnf(nlohmann::ordered_json::parse(R"({"type":"string","maxLength":300})")));
    if (!sg.ok()) return Fail(sg.error().ToString());
    grammar::Matcher sm(*sg);
    sm.Advance("\"");
    for (int32_t i = 0; i < 200; ++i) {
      sm.Advance("a");
      allowed.clear();
      double a = NowSeconds();
      sm.AllowedTokens(*vocab.trie, &allowed);
      t_string.push_back(NowSeconds() - a);
      allowed.clear();
      a = NowSeconds();
      sm.AllowedTokensReference(*vocab.trie, &allowed);
      std::sort(allowed.begin(), allowed.end());
      t_string_reference.push_back(NowSeconds() - a);
    }
  }
  const double fwd = Median(t_fwd);
  const double extra = Mean(t_grammar) - Mean(t_plain), extra_whole = Mean(t_whole) - Mean(t_plain_full);
  std::printf(
      "model %s, %d threads, vocabulary %zu tokens (trie %zu nodes, built with the vocabulary in %.0f ms)\n",
      path.c_str(), threads, vocab.pieces.size(), vocab.trie->n_nodes(), 1e3 * t_vocab);
  std::printf("decode step (median):                 %8.3f ms\n", 1e3 * fwd);
  std::printf("sampling, no grammar (mean):          %8.3f ms\n", 1e3 * Mean(t_plain));
  std::printf("sampling, JSON schema, top-k 40:      %8.3f ms  grammar cost %.2f%% of a decode step\n",
              1e3 * Mean(t_grammar), 100 * extra / fwd);
  std::printf("sampling, no grammar, top-k 0 (mean):  %7.3f ms\n", 1e3 * Mean(t_plain_full));
  std::printf("sampling, JSON schema, top-k 0 (mask): %7.3f ms  grammar cost %.2f%% of a decode step\n",
              1e3 * Mean(t_whole), 100 * extra_whole / fwd);
  std::printf("the trie mask alone (mean):            %7.3f ms  %.2f%% of a decode step (max %.3f ms)\n",
              1e3 * Mean(t_mask), 100 * Mean(t_mask) / fwd,
              1e3 * *std::max_element(t_mask.begin(), t_mask.end()));
  std::printf("the same, plain walk and sort (mean):  %7.3f ms  %.2f%% of a decode step\n",
              1e3 * Mean(t_reference), 100 * Mean(t_reference) / fwd);
  std::printf("mask inside a bounded string (median):  %7.3f ms  %.2f%% of a decode step (the worst case)\n",
              1e3 * Median(t_string), 100 * Median(t_string) / fwd);
  std::printf("the same, plain walk and sort (median): %6.3f ms  %.2f%% of a decode step\n",
              1e3 * Median(t_string_reference), 100 * Median(t_string_reference) / fwd);
  std::printf("%d steps, %d documents completed; the text:\n%s\n", steps, restarts,
              text.substr(0, 400).c_str());
  return 0;
}
