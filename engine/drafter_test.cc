// The model-based drafters (MTP head and draft model) on the tiny fixture model.
#include "engine/drafter.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "engine/drafter_kv.h"
#include "model/forward.h"
#include "model/mtp.h"

namespace rw::engine {
namespace {

const std::string kTiny = std::string(REWIND_TEST_DATA) + "/golden/models/tiny-qwen35-f32.gguf";

std::unique_ptr<model::Model> LoadTiny(int32_t n_threads = 2) {
  model::LoadOptions o;
  o.n_threads = n_threads;
  auto m = model::Model::Load(kTiny, o);
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().ToString());
  return m.ok() ? std::move(m).value() : nullptr;
}

std::vector<int32_t> Prompt(int32_t n, int32_t seed) {
  std::vector<int32_t> p(n);
  for (int32_t i = 0; i < n; ++i) p[i] = (seed * 131 + i * 37 + 11) % 4000;
  return p;
}

// The target evaluated from scratch: every position's logits and final normed hidden row. I1 makes these the
// rows any batch split of the engine would produce.
struct TargetRun {
  std::vector<float> logits;  // [n][V]
  std::vector<float> hidden;  // [n][E]
  int32_t V = 0, E = 0;
  int32_t Greedy(int32_t pos) const {
    return internal::ArgMax(std::span<const float>(logits.data() + static_cast<int64_t>(pos) * V, V));
  }
  std::span<const float> Hidden(int32_t pos0, int32_t n) const {
    return {hidden.data() + static_cast<int64_t>(pos0) * E, static_cast<size_t>(n) * E};
  }
};

TargetRun Evaluate(model::Model& m, std::span<const int32_t> tokens) {
  internal::GrowableKv kv(m.MakeKvConfig(0, 64));
  EXPECT_TRUE(kv.Reserve(static_cast<int64_t>(tokens.size())).ok());
  auto states = model::StateStorage::Create(m.MakeStateShape(), 1);
  EXPECT_TRUE(states.ok());
  model::BatchSeq b;
  b.pages = kv.pages();
  b.tokens = tokens;
  b.all_logits = true;
  model::ForwardOptions opt;
  opt.hidden_all = true;
  model::ForwardOutput out;
  EXPECT_TRUE(m.Forward(std::span<const model::BatchSeq>(&b, 1), kv.kv(), **states, &out, opt).ok());
  return {std::move(out.logits), std::move(out.hidden_all), out.n_vocab, out.n_embd};
}

// Greedy continuation of `ctx` by the target, n tokens: one prefill, then single-token decode steps.
std::vector<int32_t> GreedyContinuation(model::Model& m, std::span<const int32_t> ctx, int32_t n) {
  internal::GrowableKv kv(m.MakeKvConfig(0, 64));
  EXPECT_TRUE(kv.Reserve(static_cast<int64_t>(ctx.size()) + n).ok());
  auto states = model::StateStorage::Create(m.MakeStateShape(), 1);
  EXPECT_TRUE(states.ok());
  model::BatchSeq b;
  b.pages = kv.pages();
  b.tokens = ctx;
  model::ForwardOutput out;
  std::vector<int32_t> res;
  for (int32_t i = 0; i < n; ++i) {
    EXPECT_TRUE(m.Forward(std::span<const model::BatchSeq>(&b, 1), kv.kv(), **states, &out).ok());
    res.push_back(internal::ArgMax(out.Row(0)));
    b.state_in = 0;
    b.pos0 += static_cast<int32_t>(b.tokens.size());
    b.tokens = std::span<const int32_t>(&res.back(), 1);
  }
  return res;
}

bool SameBits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size_bytes()) == 0;
}

// ---------------------------------------------------------------- MTP head

TEST(MtpHead, LogitsAreDeterministicAndBatchInvariant) {
  auto target = LoadTiny();
  ASSERT_NE(target, nullptr);
  auto head = model::MtpHead::Create(*target);
  ASSERT_TRUE(head.ok()) << head.error().ToString();
  const std::vector<int32_t> toks = Prompt(21, 1);
  const TargetRun run = Evaluate(*target, toks);
  const int32_t N = static_cast<int32_t>(toks.size()), E = run.E;
  std::vector<float> hin(static_cast<size_t>(N) * E, 0.0f);  // [N][E] hN shifted right by one
  std::copy(run.hidden.begin(), run.hidden.end() - E, hin.begin() + E);

  // All rows at once vs. splits, with different thread counts.
  auto rows_by = [&](std::vector<int32_t> splits, int threads) {
    kernels::ThreadPool pool(threads);
    internal::GrowableKv kv((*head)->MakeKvConfig(0, 8));
    EXPECT_TRUE(kv.Reserve(N).ok());
    std::vector<float> logits, hn;
    int32_t p = 0;
    for (int32_t n : splits) {
      model::MtpOutput o;
      model::MtpRows r{
          kv.pages(), p, std::span<const int32_t>(toks).subspan(p, n),
          std::span<const float>(hin).subspan(static_cast<size_t>(p) * E, static_cast<size_t>(n) * E)};
      EXPECT_TRUE((*head)->Forward(r, kv.kv(), model::MtpOutputs::kAllRows, &o, &pool).ok());
      logits.insert(logits.end(), o.logits.begin(), o.logits.end());
      hn.insert(hn.end(), o.hn.begin(), o.hn.end());
      p += n;
    }
    EXPECT_EQ(p, N);
    return std::make_pair(logits, hn);
  };
  const auto one = rows_by({N}, 1);
  ASSERT_EQ(one.first.size(), static_cast<size_t>(N) * run.V);
  EXPECT_TRUE(SameBits(one.first, rows_by({N}, 1).first)) << "not deterministic";
  const auto split = rows_by({7, 1, 9, 4}, 3);
  EXPECT_TRUE(SameBits(one.first, split.first)) << "logits depend on the batch split or thread count";
  EXPECT_TRUE(SameBits(one.second, split.second)) << "hn depends on the batch split or thread count";
  const auto singles = rows_by(std::vector<int32_t>(N, 1), 2);
  EXPECT_TRUE(SameBits(one.first, singles.first));

  // The head computes something: finite logits that differ between rows and from the trunk's.
  for (float v : one.first) ASSERT_TRUE(std::isfinite(v));
  EXPECT_FALSE(SameBits(std::span<const float>(one.first).subspan(0, run.V),
                        std::span<const float>(one.first).subspan(run.V, run.V)));
  EXPECT_FALSE(SameBits(std::span<const float>(one.first).subspan(run.V, run.V),
                        std::span<const float>(run.logits).subspan(0, run.V)));
}

// Scalar double-precision twin of spec 8.1 for one row at position 0, where attention over the single key
// returns its V row: checks the wiring (e before hh in eh_proj, which norms, the residuals, the head).
namespace ref {
using Vec = std::vector<double>;
Vec Norm(const Vec& x, const float* w, double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double sc = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + eps);
  Vec o(x.size());
  for (size_t i = 0; i < x.size(); ++i) o[i] = x[i] * sc * w[i];
  return o;
}
Vec Mul(const kernels::Matrix& m, const Vec& x) {  // F32 matrices only (the tiny f32 fixture)
  Vec y(m.n_rows);
  for (int64_t r = 0; r < m.n_rows; ++r) {
    const float* row = reinterpret_cast<const float*>(m.data + r * m.row_bytes);
    double acc = 0;
    for (int64_t c = 0; c < m.n_cols; ++c) acc += static_cast<double>(row[c]) * x[c];
    y[r] = acc;
  }
  return y;
}
double Sig(double x) { return 1.0 / (1.0 + std::exp(-x)); }
}  // namespace ref

TEST(MtpHead, FirstRowMatchesAScalarTwinOfTheSpecGraph) {
  auto target = LoadTiny();
  ASSERT_NE(target, nullptr);
  auto head = model::MtpHead::Create(*target);
  ASSERT_TRUE(head.ok());
  const model::ModelConfig& c = target->config();
  const model::MtpWeights& w = (*head)->weights();
  const int32_t E = c.n_embd, D = c.head_dim, Hq = c.n_head, Hkv = c.n_head_kv;
  ASSERT_EQ(w.embed.type, gguf::TensorType::kF32);
  const int32_t tok = 1234;
  std::vector<float> hin(E);
  for (int32_t i = 0; i < E; ++i) hin[i] = std::cos(0.37f * static_cast<float>(i)) * 2.0f;

  ref::Vec emb(E), h(hin.begin(), hin.end());
  const float* er = reinterpret_cast<const float*>(w.embed.data + tok * w.embed.row_bytes);
  for (int32_t i = 0; i < E; ++i) emb[i] = er[i];
  ref::Vec e = ref::Norm(emb, w.enorm, c.eps), hh = ref::Norm(h, w.hnorm, c.eps);
  ref::Vec cat = e;
  cat.insert(cat.end(), hh.begin(), hh.end());
  ref::Vec u = ref::Mul(w.eh_proj, cat);
  ref::Vec t = ref::Norm(u, w.block.attn_norm, c.eps);
  const ref::Vec qg = ref::Mul(w.block.attn.q, t), v = ref::Mul(w.block.attn.v, t);
  ref::Vec att(static_cast<size_t>(Hq) * D);
  for (int32_t hd = 0; hd < Hq; ++hd)
    for (int32_t d = 0; d < D; ++d)
      att[hd * D + d] = v[(hd / (Hq / Hkv)) * D + d] * ref::Sig(qg[hd * 2 * D + D + d]);
  const ref::Vec o = ref::Mul(w.block.attn.out, att);
  for (int32_t i = 0; i < E; ++i) u[i] += o[i];
  t = ref::Norm(u, w.block.post_norm, c.eps);
  ref::Vec g = ref::Mul(w.block.ffn.gate, t);
  const ref::Vec up = ref::Mul(w.block.ffn.up, t);
  for (size_t i = 0; i < g.size(); ++i) g[i] = g[i] * ref::Sig(g[i]) * up[i];
  const ref::Vec f = ref::Mul(w.block.ffn.down, g);
  for (int32_t i = 0; i < E; ++i) u[i] += f[i];
  const ref::Vec hn = ref::Norm(u, w.head_norm, c.eps);
  const ref::Vec logits = ref::Mul(w.head, hn);

  internal::GrowableKv kv((*head)->MakeKvConfig(0, 4, model::KvType::kF32));
  ASSERT_TRUE(kv.Reserve(1).ok());
  model::MtpOutput out;
  model::MtpRows rows{kv.pages(), 0, std::span<const int32_t>(&tok, 1), hin};
  ASSERT_TRUE((*head)->Forward(rows, kv.kv(), model::MtpOutputs::kLastRow, &out, nullptr).ok());
  ASSERT_EQ(out.logits.size(), logits.size());
  double max_diff = 0, max_abs = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    max_diff = std::max(max_diff, std::abs(out.logits[i] - logits[i]));
    max_abs = std::max(max_abs, std::abs(logits[i]));
  }
  for (int32_t i = 0; i < E; ++i) EXPECT_NEAR(out.hn[i], hn[i], 1e-4 * (1 + std::abs(hn[i])));
  std::printf("MTP row vs scalar twin: max |logit diff| %.3g (max |logit| %.3g)\n", max_diff, max_abs);
  EXPECT_LT(max_diff, 1e-4 * (1 + max_abs));
  // The twin with e and hh swapped is far off: the check can tell the wiring apart.
  ref::Vec swapped = hh;
  swapped.insert(swapped.end(), e.begin(), e.end());
  const ref::Vec u2 = ref::Mul(w.eh_proj, swapped);
  double d2 = 0;
  for (int32_t i = 0; i < E; ++i) d2 = std::max(d2, std::abs(u2[i] - ref::Mul(w.eh_proj, cat)[i]));
  EXPECT_GT(d2, 1e-2);
}

TEST(MtpHead, KvOnlyRowsMatchFullRows) {
  auto target = LoadTiny();
  ASSERT_NE(target, nullptr);
  auto head = model::MtpHead::Create(*target);
  ASSERT_TRUE(head.ok());
  const std::vector<int32_t> toks = Prompt(10, 2);
  const int32_t N = 10, E = target->config().n_embd;
  std::vector<float> hin(static_cast<size_t>(N) * E);
  for (size_t i = 0; i < hin.size(); ++i) hin[i] = std::sin(0.01f * static_cast<float>(i));
  kernels::ThreadPool pool(2);
  internal::GrowableKv a((*head)->MakeKvConfig(0, 4)), b((*head)->MakeKvConfig(0, 4));
  ASSERT_TRUE(a.Reserve(N).ok() && b.Reserve(N).ok());
  model::MtpOutput oa, ob;
  // a: 9 rows KV only, then the last row; b: all rows with outputs. Same last row.
  model::MtpRows head9{a.pages(), 0, std::span<const int32_t>(toks).first(9),
                       std::span<const float>(hin).first(9 * E)};
  ASSERT_TRUE((*head)->Forward(head9, a.kv(), model::MtpOutputs::kKvOnly, &oa, &pool).ok());
  EXPECT_TRUE(oa.logits.empty());
  model::MtpRows last{a.pages(), 9, std::span<const int32_t>(toks).subspan(9),
                      std::span<const float>(hin).subspan(9 * E)};
  ASSERT_TRUE((*head)->Forward(last, a.kv(), model::MtpOutputs::kLastRow, &oa, &pool).ok());
  model::MtpRows all{b.pages(), 0, toks, hin};
  ASSERT_TRUE((*head)->Forward(all, b.kv(), model::MtpOutputs::kLastRow, &ob, &pool).ok());
  EXPECT_TRUE(SameBits(oa.logits, ob.logits));
  EXPECT_TRUE(SameBits(oa.hn, ob.hn));
}

TEST(MtpHead, LimitedVocabularyGivesThePrefixOfTheFullLogits) {
  auto target = LoadTiny();
  ASSERT_NE(target, nullptr);
  auto head = model::MtpHead::Create(*target);
  ASSERT_TRUE(head.ok());
  const std::vector<int32_t> toks = Prompt(6, 4);
  const int32_t N = 6, E = target->config().n_embd, V = target->config().n_vocab, limit = 1000;
  ASSERT_LT(limit, V);
  std::vector<float> hin(static_cast<size_t>(N) * E);
  for (size_t i = 0; i < hin.size(); ++i) hin[i] = std::cos(0.02f * static_cast<float>(i));
  kernels::ThreadPool pool(2);
  internal::GrowableKv a((*head)->MakeKvConfig(0, 4)), b((*head)->MakeKvConfig(0, 4));
  ASSERT_TRUE(a.Reserve(N).ok() && b.Reserve(N).ok());
  model::MtpOutput full, part;
  ASSERT_TRUE((*head)->Forward({a.pages(), 0, toks, hin}, a.kv(), model::MtpOutputs::kAllRows, &full, &pool).ok());
  (*head)->LimitVocabulary(limit);
  ASSERT_TRUE((*head)->Forward({b.pages(), 0, toks, hin}, b.kv(), model::MtpOutputs::kAllRows, &part, &pool).ok());
  ASSERT_EQ(full.n_vocab, V);
  ASSERT_EQ(part.n_vocab, limit);
  ASSERT_EQ(part.logits.size(), static_cast<size_t>(N) * limit);
  for (int32_t r = 0; r < N; ++r) {
    EXPECT_EQ(std::memcmp(part.logits.data() + static_cast<size_t>(r) * limit,
                          full.logits.data() + static_cast<size_t>(r) * V, sizeof(float) * limit),
              0)
        << "row " << r;
  }
  EXPECT_TRUE(SameBits(part.hn, full.hn));
}

TEST(MtpHead, RejectsBadInputWithoutWriting) {
  auto target = LoadTiny();
  ASSERT_NE(target, nullptr);
  auto head = model::MtpHead::Create(*target);
  ASSERT_TRUE(head.ok());
  const int32_t E = target->config().n_embd;
  internal::GrowableKv kv((*head)->MakeKvConfig(0, 4));
  ASSERT_TRUE(kv.Reserve(4).ok());
  std::vector<float> hin(E, 0.5f);
  model::MtpOutput o;
  const int32_t bad_tok = 4000, ok_tok = 5;
  model::MtpRows r{kv.pages(), 0, std::span<const int32_t>(&bad_tok, 1), hin};
  EXPECT_FALSE((*head)->Forward(r, kv.kv(), model::MtpOutputs::kLastRow, &o, nullptr).ok());
  r.tokens = std::span<const int32_t>(&ok_tok, 1);
  r.hidden = std::span<const float>(hin).first(E - 1);
  EXPECT_FALSE((*head)->Forward(r, kv.kv(), model::MtpOutputs::kLastRow, &o, nullptr).ok());
  r.hidden = hin;
  r.pos0 = static_cast<int32_t>(kv.pages().size()) * 4;  // one past the positions the page table covers
  EXPECT_FALSE((*head)->Forward(r, kv.kv(), model::MtpOutputs::kLastRow, &o, nullptr).ok());
  r.pos0 = 3;
  EXPECT_TRUE((*head)->Forward(r, kv.kv(), model::MtpOutputs::kLastRow, &o, nullptr).ok());
}

TEST(MtpHead, ModelWithoutNextnBlockIsUnsupported) {
  auto target = LoadTiny();
  ASSERT_NE(target, nullptr);
  model::ModelConfig c = target->config();
  c.n_nextn = 0;
  auto w = model::BindMtpWeights(target->file(), c, target->weights());
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.error().kind, ErrorKind::kUnsupported);
  c.n_nextn = 1;
  c.n_layer = 7;  // block 7 is a GDN block: no nextn tensors
  auto w2 = model::BindMtpWeights(target->file(), c, target->weights());
  ASSERT_FALSE(w2.ok());
  EXPECT_NE(w2.error().message.find("blk.7."), std::string::npos) << w2.error().message;
}

// ---------------------------------------------------------------- MTP drafter

// Observes `tokens` at pos0 with the target's hidden rows from a full run.
void ObserveSplit(Drafter& d, int32_t key, const TargetRun& run, std::span<const int32_t> toks,
                  const std::vector<int32_t>& splits) {
  int32_t p = 0;
  for (int32_t n : splits) {
    d.Observe(key, p, toks.subspan(p, n), run.Hidden(p, n));
    p += n;
  }
  ASSERT_EQ(p, static_cast<int32_t>(toks.size()));
}

TEST(MtpDrafter, DraftsDoNotDependOnObserveSplitsOrOtherKeys) {
  auto target = LoadTiny();
  ASSERT_NE(target, nullptr);
  auto a = MakeMtpDrafter(*target, 1);
  auto b = MakeMtpDrafter(*target, 2);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE((*a)->wants_hidden());
  EXPECT_STREQ((*a)->name(), "mtp");
  const std::vector<int32_t> prompt = Prompt(24, 3), other = Prompt(17, 4);
  const TargetRun run = Evaluate(*target, prompt), run_other = Evaluate(*target, other);
  std::vector<int32_t> ctx = prompt;
  ctx.push_back(run.Greedy(23));
  std::vector<int32_t> ctx_other = other;
  ctx_other.push_back(run_other.Greedy(16));

  (*a)->Begin(0, prompt);
  ObserveSplit(**a, 0, run, prompt, {24});
  // b: two keys interleaved, the prompt in uneven chunks.
  (*b)->Begin(7, prompt);
  (*b)->Begin(3, other);
  (*b)->Observe(3, 0, std::span<const int32_t>(other).first(9), run_other.Hidden(0, 9));
  ObserveSplit(**b, 7, run, std::span<const int32_t>(prompt).first(6), {5, 1});
  (*b)->Observe(3, 9, std::span<const int32_t>(other).subspan(9), run_other.Hidden(9, 8));
  (*b)->Observe(7, 6, std::span<const int32_t>(prompt).subspan(6, 10), run.Hidden(6, 10));
  const std::vector<int32_t> d_other = (*b)->Draft(3, ctx_other, 3);
  (*b)->Observe(7, 16, std::span<const int32_t>(prompt).subspan(16), run.Hidden(16, 8));

  const std::vector<int32_t> da = (*a)->Draft(0, ctx, 5);
  ASSERT_EQ(da.size(), 5u);
  EXPECT_EQ((*b)->Draft(7, ctx, 5), da);
  EXPECT_EQ(d_other.size(), 3u);
  // Drafting is repeatable (its provisional KV rows do not leak into the next draft).
  EXPECT_EQ((*a)->Draft(0, ctx, 5), da);
  EXPECT_EQ((*a)->Draft(0, ctx, 2), std::vector<int32_t>(da.begin(), da.begin() + 2));
  // A different pending token changes the first draft's input.
  std::vector<int32_t> ctx2 = ctx;
  ctx2.back() = (ctx.back() + 1) % 4000;
  EXPECT_EQ((*a)->Draft(0, ctx2, 5).size(), 5u);
  EXPECT_TRUE((*a)->Draft(0, ctx, 0).empty());
  (*a)->End(0);
}

// A speculative loop verified by a from-scratch target; the drafter that drafted, observed the
// verify batches and rolled back drafts exactly like one that only ever observed the accepted tokens.
TEST(MtpDrafter, RollbackAndReobserveDraftsLikeNeverDrafted) {
  auto target = LoadTiny();
  ASSERT_NE(target, nullptr);
  auto spec = MakeMtpDrafter(*target, 2);
  ASSERT_TRUE(spec.ok());
  std::vector<int32_t> ctx = Prompt(12, 5);
  TargetRun run = Evaluate(*target, ctx);
  (*spec)->Begin(1, ctx);
  ObserveSplit(**spec, 1, run, ctx, {12});
  ctx.push_back(run.Greedy(11));
  for (int round = 0; round < 8; ++round) {
    const int32_t P = static_cast<int32_t>(ctx.size()) - 1;  // pending token position
    const std::vector<int32_t> drafts = (*spec)->Draft(1, ctx, 3);
    ASSERT_EQ(drafts.size(), 3u);
    // Never-drafted reference: a fresh drafter observing the accepted context in one batch.
    {
      auto fresh = MakeMtpDrafter(*target, 1);
      ASSERT_TRUE(fresh.ok());
      const TargetRun ref = Evaluate(*target, std::span<const int32_t>(ctx).first(P));
      (*fresh)->Begin(1, ctx);
      (*fresh)->Observe(1, 0, std::span<const int32_t>(ctx).first(P), ref.Hidden(0, P));
      EXPECT_EQ((*fresh)->Draft(1, ctx, 3), drafts) << "round " << round;
    }
    // Verify [pending, d1..d3] in one batch (the target from scratch; I1 makes its rows the engine's).
    std::vector<int32_t> batch{ctx.back()};
    batch.insert(batch.end(), drafts.begin(), drafts.end());
    std::vector<int32_t> full = ctx;
    full.insert(full.end(), drafts.begin(), drafts.end());
    const TargetRun v = Evaluate(*target, full);
    (*spec)->Observe(1, P, batch, v.Hidden(P, 4));
    // The random tiny model's head rarely agrees with its trunk: accept round % 4 drafts regardless (as a
    // sampler at high temperature could), so rollbacks cut the verify batch at every offset.
    const int32_t k = round % 4;
    const int32_t next = v.Greedy(P + k);
    (*spec)->Rollback(1, P + 1 + k);
    ctx.resize(P + 1);
    ctx.insert(ctx.end(), drafts.begin(), drafts.begin() + k);
    ctx.push_back(next);
  }
}

TEST(MtpDrafter, DraftsAfterUnobservedPrefixOrMissingHiddenRows) {
  auto target = LoadTiny();
  ASSERT_NE(target, nullptr);
  auto d = MakeMtpDrafter(*target, 1);
  ASSERT_TRUE(d.ok());
  std::vector<int32_t> ctx = Prompt(20, 6);
  const TargetRun run = Evaluate(*target, ctx);
  (*d)->Begin(2, ctx);
  // The target served [0, 12) from its cache: only [12, 20) is observed.
  (*d)->Observe(2, 12, std::span<const int32_t>(ctx).subspan(12), run.Hidden(12, 8));
  ctx.push_back(run.Greedy(19));
  EXPECT_EQ((*d)->Draft(2, ctx, 4).size(), 4u);
  // Never observed at all: still proposes tokens.
  (*d)->Begin(5, ctx);
  EXPECT_EQ((*d)->Draft(5, ctx, 2).size(), 2u);
  // Observed without hidden rows (a target that did not export them): zeros, no crash.
  (*d)->Begin(6, ctx);
  (*d)->Observe(6, 0, std::span<const int32_t>(ctx).first(20), {});
  EXPECT_EQ((*d)->Draft(6, ctx, 2).size(), 2u);
}

// ---------------------------------------------------------------- draft-model drafter

TEST(ModelDrafter, SelfDraftingProposesTheTargetsGreedyContinuation) {
  auto target = LoadTiny();
  ASSERT_NE(target, nullptr);
  auto d = MakeModelDrafter(kTiny, *target, 2);
  ASSERT_TRUE(d.ok()) << d.error().ToString();
  EXPECT_STREQ((*d)->name(), "draft");
  EXPECT_FALSE((*d)->wants_hidden());
  std::vector<int32_t> ctx = Prompt(15, 7);
  (*d)->Begin(4, ctx);
  ctx.push_back(Evaluate(*target, ctx).Greedy(14));
  int32_t n_drafted = 0, n_accepted = 0;
  for (int round = 0; round < 6; ++round) {
    const int32_t P = static_cast<int32_t>(ctx.size()) - 1;
    const int32_t n = 1 + round % 4;
    const std::vector<int32_t> drafts = (*d)->Draft(4, ctx, n);
    const std::vector<int32_t> greedy = GreedyContinuation(*target, ctx, n + 1);
    ASSERT_EQ(drafts, std::vector<int32_t>(greedy.begin(), greedy.begin() + n)) << "round " << round;
    n_drafted += n;
    int32_t k = n;
    int32_t next = greedy[n];
    if (round % 3 == 2) {  // the engine rejects a tail (e.g. sampling at temperature > 0)
      k = n / 2;
      next = (greedy[k] + 11) % 4000;
    }
    n_accepted += k;
    (*d)->Rollback(4, P + 1 + k);
    ctx.resize(P + 1);
    ctx.insert(ctx.end(), drafts.begin(), drafts.begin() + k);
    ctx.push_back(next);
  }
  std::printf("draft-model drafter (self): %d drafted, %d accepted\n", n_drafted, n_accepted);
}

TEST(ModelDrafter, KeysAreIndependentAndContextChangesAreFollowed) {
  auto target = LoadTiny();
  ASSERT_NE(target, nullptr);
  auto d = MakeModelDrafter(kTiny, *target, 1);
  ASSERT_TRUE(d.ok());
  std::vector<int32_t> a = Prompt(9, 8), b = Prompt(13, 9);
  (*d)->Begin(0, a);
  (*d)->Begin(1, b);
  const std::vector<int32_t> da = (*d)->Draft(0, a, 3);
  const std::vector<int32_t> db = (*d)->Draft(1, b, 3);
  EXPECT_EQ(da, GreedyContinuation(*target, a, 3));
  EXPECT_EQ(db, GreedyContinuation(*target, b, 3));
  // No Rollback call: the context diverges inside the drafted tail and inside the committed prefix.
  std::vector<int32_t> a2 = a;
  a2.push_back(da[0]);
  a2.push_back((da[1] + 1) % 4000);
  EXPECT_EQ((*d)->Draft(0, a2, 2), GreedyContinuation(*target, a2, 2));
  std::vector<int32_t> b2(b.begin(), b.begin() + 5);
  b2.push_back(42);
  EXPECT_EQ((*d)->Draft(1, b2, 2), GreedyContinuation(*target, b2, 2));
  (*d)->End(0);
  EXPECT_EQ((*d)->Draft(0, a, 3), da);
}

TEST(ModelDrafter, MissingFileIsAClearError) {
  auto target = LoadTiny();
  ASSERT_NE(target, nullptr);
  auto d = MakeModelDrafter("/nonexistent/draft.gguf", *target, 1);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().message.find("/nonexistent/draft.gguf"), std::string::npos);
}

}  // namespace
}  // namespace rw::engine
