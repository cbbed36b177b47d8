// Invariant I1 on whole models: the logits and the recurrent state are bit-identical whether a prompt is
// prefilled in one batch, token by token or in random micro-batches, with 1/2/3/5/8/16 threads, alone or batched with
// other sequences; and the replay log rebuilds the forward's state bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/attention.h"
#include "model/forward.h"

namespace rw::model {
namespace {

const std::string kDir = std::string(REWIND_TEST_DATA) + "/golden/models/";

std::vector<int32_t> Prompt(int n, uint32_t seed, int vocab) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = static_cast<int32_t>(rng() % vocab);
  return t;
}

bool SameBits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size_bytes()) == 0;
}

struct Harness {
  std::unique_ptr<Model> model;
  std::unique_ptr<KvStorage> kv;
  std::unique_ptr<StateStorage> st;
  std::vector<int32_t> pages;  // identity page table per slot: slot s owns pages [s·P, (s+1)·P)
  int32_t pages_per_seq = 0;

  Harness(const std::string& file, int32_t page_size, KvTypes type, int n_slots = 4, int max_tokens = 200) {
    auto m = Model::Load(kDir + file);
    EXPECT_TRUE(m.ok()) << m.error().ToString();
    model = std::move(m).value();
    pages_per_seq = (max_tokens + page_size - 1) / page_size;
    kv = std::move(KvStorage::Create(model->MakeKvConfig(pages_per_seq * n_slots, page_size, type))).value();
    st = std::move(StateStorage::Create(model->MakeStateShape(), n_slots)).value();
    pages.resize(pages_per_seq * n_slots);
    for (size_t i = 0; i < pages.size(); ++i) pages[i] = static_cast<int32_t>(i);
  }
  std::span<const int32_t> Pages(int slot) const { return {pages.data() + slot * pages_per_seq, size_t(pages_per_seq)}; }

  // Runs `tokens` for sequence `slot` in the given chunk sizes; returns all logits rows concatenated.
  std::vector<float> Run(const std::vector<int32_t>& tokens, const std::vector<int>& chunks, int slot = 0) {
    std::vector<float> logits;
    int32_t pos = 0;
    for (int n : chunks) {
      BatchSeq b;
      b.state_in = pos == 0 ? -1 : slot;
      b.state_out = slot;
      b.pages = Pages(slot);
      b.pos0 = pos;
      b.tokens = {tokens.data() + pos, size_t(n)};
      b.all_logits = true;
      ForwardOutput out;
      Status s = model->Forward({&b, 1}, *kv, *st, &out);
      EXPECT_TRUE(s.ok()) << s.error().ToString();
      logits.insert(logits.end(), out.logits.begin(), out.logits.end());
      pos += n;
    }
    return logits;
  }
};

std::vector<int> RandomSplit(int n, std::mt19937& rng) {
  std::vector<int> c;
  while (n > 0) {
    int k = std::min<int>(n, 1 + rng() % 12);
    c.push_back(k);
    n -= k;
  }
  return c;
}

void CheckSplitsAndThreads(const std::string& file, KvTypes type, int32_t page_size) {
  Harness h(file, page_size, type);
  const int n = 45;
  const auto tokens = Prompt(n, 7, h.model->config().n_vocab);
  const auto whole = h.Run(tokens, {n});
  const auto state = std::vector<float>(h.st->SlotData(0).begin(), h.st->SlotData(0).end());
  std::mt19937 rng(11);
  // 5, 8 and 16 threads oversubscribe a small machine (correct, only slower) and split heads and row ranges
  // differently: a GDN head's state rows across threads once threads outnumber heads.
  for (int threads : {1, 2, 3, 5, 8, 16}) {
    h.model->SetThreads(threads);
    EXPECT_TRUE(SameBits(h.Run(tokens, std::vector<int>(n, 1)), whole)) << "token by token, threads " << threads;
    EXPECT_TRUE(SameBits(h.st->SlotData(0), state));
    EXPECT_TRUE(SameBits(h.Run(tokens, RandomSplit(n, rng)), whole)) << "random split, threads " << threads;
    EXPECT_TRUE(SameBits(h.st->SlotData(0), state));
  }
}

TEST(Forward, Qwen35PrefillEqualsTokenByTokenAndRandomSplitsBitwise) {
  CheckSplitsAndThreads("tiny-qwen35-f32.gguf", KvType::kF16, 32);
}
TEST(Forward, Qwen35WithF32KvAndSmallPagesIsSplitInvariant) {
  CheckSplitsAndThreads("tiny-qwen35-f32.gguf", KvType::kF32, 8);
}
// I1 for every quantised KV cache type: a row's blocks are a function of that row only, so the cached bytes and
// hence the logits are the same whichever split wrote them (page size 8: the 20 tokens cross pages). Lighter
// than CheckSplitsAndThreads (threads are covered there; the cache type does not touch the thread split).
TEST(Forward, EveryQuantisedKvTypeIsSplitInvariant) {
  for (KvTypes t : {KvTypes(KvType::kQ8_0), KvTypes(KvType::kQ4_0), KvTypes(KvType::kQ4_1), KvTypes(KvType::kQ5_0),
                    KvTypes(KvType::kQ5_1), KvTypes(KvType::kIQ4_NL), KvTypes(KvType::kBF16),
                    KvTypes(KvType::kQ8_0, KvType::kF16)}) {
    SCOPED_TRACE(kernels::KvTypesName(t));
    Harness h("tiny-qwen35-f32.gguf", 8, t, 1);
    h.model->SetThreads(2);
    const int n = 20;
    const auto tokens = Prompt(n, 7, h.model->config().n_vocab);
    const auto whole = h.Run(tokens, {n});
    EXPECT_TRUE(SameBits(h.Run(tokens, std::vector<int>(n, 1)), whole)) << "token by token";
    EXPECT_TRUE(SameBits(h.Run(tokens, {3, 9, 1, 7}), whole)) << "split 3+9+1+7";
  }
}
// At depth: past several attention segments (kernels::kAttnSegment), a prefill in one batch, in uneven chunks
// and with decode steps (which spread one token's keys over the threads by segment) give the same bits, with
// 1 and 3 threads and for a quantised cache.
void CheckSplitsAtDepth(KvTypes type) {
  const int n = 2 * kernels::kAttnSegment + 70;
  Harness h("tiny-qwen35-f32.gguf", 32, type, 1, n);
  const auto tokens = Prompt(n, 5, h.model->config().n_vocab);
  h.model->SetThreads(1);
  const auto whole = h.Run(tokens, {n});
  const int64_t V = h.model->config().n_vocab;
  for (int threads : {1, 3}) {
    h.model->SetThreads(threads);
    // Chunks ending on and across segment and block boundaries, then 24 decode steps.
    std::vector<int> chunks = {511, 2, 300, 31, 200};
    int used = 0;
    for (int c : chunks) used += c;
    chunks.push_back(n - used - 24);
    for (int i = 0; i < 24; ++i) chunks.push_back(1);
    const auto split = h.Run(tokens, chunks);
    ASSERT_EQ(split.size(), whole.size());
    for (int p = 0; p < n; ++p)
      ASSERT_EQ(std::memcmp(split.data() + p * V, whole.data() + p * V, V * sizeof(float)), 0)
          << "row " << p << ", threads " << threads << ", " << kernels::KvTypesName(type);
  }
}

TEST(Forward, PrefillAndDecodeAtDepthDoNotDependOnChunksOrThreads) { CheckSplitsAtDepth(KvType::kF16); }
TEST(Forward, QuantisedCacheAtDepthDoesNotDependOnChunksOrThreads) { CheckSplitsAtDepth(KvType::kQ4_0); }

TEST(Forward, QuantisedKvTypeFollowsTheF32CacheClosely) {
  // Same prompt with an F32 and a q8_0 / q4_0 cache: close (a wrong block layout or head offset is not).
  const int n = 40;
  std::vector<float> base;
  for (KvType t : {KvType::kF32, KvType::kQ8_0, KvType::kQ4_0}) {
    Harness h("tiny-qwen35-f32.gguf", 16, t);
    const auto tokens = Prompt(n, 3, h.model->config().n_vocab);
    const auto logits = h.Run(tokens, {n});
    if (t == KvType::kF32) {
      base = logits;
      continue;
    }
    double worst = 0;
    for (size_t i = 0; i < logits.size(); ++i) worst = std::max<double>(worst, std::fabs(logits[i] - base[i]));
    std::printf("%s KV vs F32 KV: max |dlogit| %.3e\n", std::string(kernels::KvTypeName(t)).c_str(), worst);
    EXPECT_LT(worst, t == KvType::kQ8_0 ? 0.2 : 1.5);  // measured 0.033 / 0.58; a wrong layout gives O(4)
    EXPECT_GT(worst, 0.0);
  }
}
TEST(Forward, QuantisedQwen35IsSplitInvariant) { CheckSplitsAndThreads("tiny-qwen35-q4_k_m.gguf", KvType::kF16, 32); }
TEST(Forward, Qwen35MoeIsSplitInvariant) { CheckSplitsAndThreads("tiny-qwen35moe-f32.gguf", KvType::kF16, 16); }
TEST(Forward, Qwen3NextIsSplitInvariant) { CheckSplitsAndThreads("tiny-qwen3next-f32.gguf", KvType::kF16, 32); }
TEST(Forward, NemotronHIsSplitInvariant) { CheckSplitsAndThreads("tiny-nemotron-h-f32.gguf", KvType::kF16, 16); }
TEST(Forward, NemotronHMoeIsSplitInvariant) { CheckSplitsAndThreads("tiny-nemotron-h-moe-f32.gguf", KvType::kF16, 32); }
TEST(Forward, GraniteHybridIsSplitInvariant) { CheckSplitsAndThreads("tiny-granite-h-f32.gguf", KvType::kF32, 8); }
TEST(Forward, Lfm2ShortConvHybridIsSplitInvariant) { CheckSplitsAndThreads("tiny-lfm2-f32.gguf", KvType::kF16, 8); }
TEST(Forward, Lfm2MoeIsSplitInvariant) { CheckSplitsAndThreads("tiny-lfm2-moe-f32.gguf", KvType::kF16, 16); }
TEST(Forward, KimiLinearKdaMlaHybridIsSplitInvariant) {
  CheckSplitsAndThreads("tiny-kimi-linear-f32.gguf", KvType::kF16, 16);
}
TEST(Forward, KimiLinearIsSplitInvariantWithAQuantisedLatentCache) {
  CheckSplitsAndThreads("tiny-kimi-linear-f32.gguf", KvType::kQ8_0, 8);
}
// The latent rows are Hadamard-rotated in a quantised cache (head dim 64): queries with K, V and back on the
// attention output. A rotation missing on one side moves every row's logits by whole units; quantisation alone
// moves them by a few hundredths, except at a token whose MoE routing it flips (a random model has near ties).
TEST(Forward, KimiLinearQuantisedLatentCacheStaysCloseToF32) {
  Harness f32("tiny-kimi-linear-f32.gguf", 16, KvType::kF32, 1);
  const int n = 60;
  const auto tokens = Prompt(n, 5, f32.model->config().n_vocab);
  const auto a = f32.Run(tokens, {n});
  const size_t V = f32.model->config().n_vocab;
  for (KvTypes t : {KvTypes(KvType::kQ8_0), KvTypes(KvType::kQ8_0, KvType::kF32), KvTypes(KvType::kF32, KvType::kQ8_0)}) {
    Harness q("tiny-kimi-linear-f32.gguf", 16, t, 1);
    const auto b = q.Run(tokens, {n});
    ASSERT_EQ(a.size(), b.size());
    std::vector<float> row_max(n, 0.0f);
    for (size_t i = 0; i < a.size(); ++i) row_max[i / V] = std::max(row_max[i / V], std::abs(a[i] - b[i]));
    int far = 0;
    for (float m : row_max) far += m > 0.25f;
    std::sort(row_max.begin(), row_max.end());
    EXPECT_GT(row_max[n / 2], 0.0f);
    EXPECT_LT(row_max[n / 2], 0.1f);  // median row
    EXPECT_LE(far, 2);                // routing flips
  }
}
TEST(Forward, GraniteHybridMoeIsSplitInvariant) {
  CheckSplitsAndThreads("tiny-granite-h-moe-f32.gguf", KvType::kF16, 16);
}

void CheckBatchedWithOthers(const std::string& file) {
  Harness h(file, 16, KvType::kF16);
  const int V = h.model->config().n_vocab;
  const auto a = Prompt(30, 1, V), b = Prompt(17, 2, V), c = Prompt(5, 3, V);
  // Alone.
  const auto la = h.Run(a, {30}, 0), lb = h.Run(b, {17}, 1), lc = h.Run(c, {5}, 2);
  // Together in one batch, in another order, with other slots.
  std::vector<BatchSeq> batch(3);
  const std::vector<const std::vector<int32_t>*> toks = {&c, &a, &b};
  for (int i = 0; i < 3; ++i) {
    batch[i].state_in = -1;
    batch[i].state_out = i + 1;
    batch[i].pages = h.Pages(i + 1);
    batch[i].tokens = *toks[i];
    batch[i].all_logits = true;
  }
  ForwardOutput out;
  ASSERT_TRUE(h.model->Forward(batch, *h.kv, *h.st, &out).ok());
  const size_t rv = V;
  EXPECT_TRUE(SameBits({out.logits.data(), 5 * rv}, lc));
  EXPECT_TRUE(SameBits({out.logits.data() + 5 * rv, 30 * rv}, la));
  EXPECT_TRUE(SameBits({out.logits.data() + 35 * rv, 17 * rv}, lb));
  EXPECT_EQ(out.seq_first_row, (std::vector<int32_t>{0, 5, 35}));
}

TEST(Forward, Qwen35SequenceLogitsDoNotDependOnOtherSequencesInTheBatch) {
  CheckBatchedWithOthers("tiny-qwen35-f32.gguf");
}
TEST(Forward, MoeExpertsDoNotDependOnOtherTokensRoutedThere) { CheckBatchedWithOthers("tiny-qwen35moe-f32.gguf"); }
TEST(Forward, SigmoidMoeExpertsDoNotDependOnOtherTokensRoutedThere) {
  CheckBatchedWithOthers("tiny-nemotron-h-moe-f32.gguf");
}
TEST(Forward, NemotronHSequenceLogitsDoNotDependOnOtherSequencesInTheBatch) {
  CheckBatchedWithOthers("tiny-nemotron-h-f32.gguf");
}

// An intermediate prefill chunk asks for no logits: it gets no output row, its state is the same bits, and the
// other sequences' rows are unchanged.
TEST(Forward, AChunkWithoutLogitsGetsNoRowAndChangesNothingElse) {
  Harness h("tiny-qwen35-f32.gguf", 16, KvType::kF16);
  const int V = h.model->config().n_vocab;
  const auto a = Prompt(30, 1, V), b = Prompt(17, 2, V);
  h.Run(a, {30}, 0);
  const auto lb = h.Run(b, {17}, 1);
  std::vector<BatchSeq> batch(2);
  batch[0] = {-1, 2, h.Pages(2), 0, a};
  batch[0].no_logits = true;
  batch[1] = {-1, 3, h.Pages(3), 0, b};
  batch[1].all_logits = true;
  ForwardOutput out;
  ASSERT_TRUE(h.model->Forward(batch, *h.kv, *h.st, &out).ok());
  ASSERT_EQ(out.logits.size(), size_t{17} * V);
  EXPECT_TRUE(SameBits(out.logits, lb));
  EXPECT_EQ(out.seq_first_row, (std::vector<int32_t>{0, 0}));
  EXPECT_TRUE(SameBits(h.st->SlotData(2), h.st->SlotData(0)));
  // Alone, it runs without the LM head at all.
  batch.resize(1);
  batch[0].state_out = 3;
  batch[0].pages = h.Pages(3);
  ASSERT_TRUE(h.model->Forward(batch, *h.kv, *h.st, &out).ok());
  EXPECT_TRUE(out.logits.empty());
  EXPECT_TRUE(SameBits(h.st->SlotData(3), h.st->SlotData(0)));
}

TEST(Forward, StateInIsLeftUntouchedWhenStateOutDiffers) {
  Harness h("tiny-qwen35-f32.gguf", 32, KvType::kF16);
  const auto t = Prompt(12, 5, h.model->config().n_vocab);
  h.Run(t, {8}, 0);
  const auto before = std::vector<float>(h.st->SlotData(0).begin(), h.st->SlotData(0).end());
  BatchSeq b{0, 1, h.Pages(0), 8, {t.data() + 8, 4}, false};
  ForwardOutput out;
  ASSERT_TRUE(h.model->Forward({&b, 1}, *h.kv, *h.st, &out).ok());
  EXPECT_TRUE(SameBits(h.st->SlotData(0), before));
  EXPECT_FALSE(SameBits(h.st->SlotData(1), before));
  EXPECT_EQ(out.logits.size(), size_t(h.model->config().n_vocab));
  EXPECT_EQ(out.row_pos[0], 11);
}

void CheckReplay(const std::string& file) {
  Harness h(file, 32, KvType::kF16, 5);
  const int V = h.model->config().n_vocab;
  const auto t = Prompt(20, 9, V);
  h.Run(t, {6}, 0);  // slot 0: state after 6 tokens
  // Verify-style batch of 14 tokens from slot 0 into slot 1, recording the replay log.
  ReplayLog log;
  ForwardOptions opt;
  opt.replay = &log;
  BatchSeq b{0, 1, h.Pages(0), 6, {t.data() + 6, 14}, true};
  ForwardOutput out;
  ASSERT_TRUE(h.model->Forward({&b, 1}, *h.kv, *h.st, &out, opt).ok());
  ASSERT_EQ(log.seqs.size(), 1u);
  EXPECT_EQ(log.seqs[0].rows.size() * sizeof(float), 14 * h.model->ReplayBytesPerToken());
  for (int k = 0; k <= 14; ++k) {
    // Ground truth: a fresh forward of the first 6 + k tokens in slot 3 (pages of slot 3).
    std::vector<int> chunks = {6};
    if (k > 0) chunks.push_back(k);
    std::vector<int32_t> prefix(t.begin(), t.begin() + 6 + k);
    h.Run(prefix, chunks, 3);
    ASSERT_TRUE(h.model->ReplayState(0, 2, log.seqs[0], k, *h.st).ok());
    EXPECT_TRUE(SameBits(h.st->SlotData(2), h.st->SlotData(3))) << "k = " << k;
  }
  EXPECT_TRUE(SameBits(h.st->SlotData(2), h.st->SlotData(1)));
  // In place, and out of range.
  ASSERT_TRUE(h.model->ReplayState(0, 0, log.seqs[0], 14, *h.st).ok());
  EXPECT_TRUE(SameBits(h.st->SlotData(0), h.st->SlotData(1)));
  EXPECT_FALSE(h.model->ReplayState(0, 2, log.seqs[0], 15, *h.st).ok());
}

TEST(Replay, RebuildsTheForwardStateBitwiseForEveryPrefixQwen35) { CheckReplay("tiny-qwen35-f32.gguf"); }
TEST(Replay, RebuildsTheForwardStateBitwiseForEveryPrefixQwen3Next) { CheckReplay("tiny-qwen3next-f32.gguf"); }
TEST(Replay, RebuildsTheForwardStateBitwiseForEveryPrefixQuantised) { CheckReplay("tiny-qwen35-q8_0.gguf"); }
TEST(Replay, RebuildsTheMamba2StateBitwiseForEveryPrefixNemotronH) { CheckReplay("tiny-nemotron-h-f32.gguf"); }
TEST(Replay, RebuildsTheMamba2StateBitwiseForEveryPrefixGraniteHybrid) { CheckReplay("tiny-granite-h-f32.gguf"); }
TEST(Replay, RebuildsTheShortConvStateBitwiseForEveryPrefixLfm2) { CheckReplay("tiny-lfm2-f32.gguf"); }
TEST(Replay, RebuildsTheKdaStateBitwiseForEveryPrefixKimiLinear) { CheckReplay("tiny-kimi-linear-f32.gguf"); }
TEST(Replay, RebuildsTheMamba2StateBitwiseForEveryPrefixGraniteHybridMoe) {
  CheckReplay("tiny-granite-h-moe-f32.gguf");
}

// Lazy rollback: a forward that starts from the batch-start state and re-applies the first k logged rows
// (BatchSeq::prefix) gives the logits and state of ReplayState(k) followed by the same forward, bit for bit,
// and leaves the start state untouched.
void CheckFusedReplay(const std::string& file) {
  Harness h(file, 32, KvType::kF16, 5);
  const int V = h.model->config().n_vocab;
  const auto t = Prompt(12, 21, V), u = Prompt(3, 22, V);  // u: the tokens after a rejected draft
  h.Run(t, {6}, 0);
  ReplayLog log;
  ForwardOptions opt;
  opt.replay = &log;
  BatchSeq v{0, 1, h.Pages(0), 6, {t.data() + 6, 6}, true};
  ForwardOutput out;
  ASSERT_TRUE(h.model->Forward({&v, 1}, *h.kv, *h.st, &out, opt).ok());
  const auto start = std::vector<float>(h.st->SlotData(0).begin(), h.st->SlotData(0).end());
  for (int k = 0; k <= 6; ++k) {
    ASSERT_TRUE(h.model->ReplayState(0, 2, log.seqs[0], k, *h.st).ok());
    BatchSeq eager{2, 3, h.Pages(0), 6 + k, {u.data(), u.size()}, true};
    ForwardOutput a;
    ASSERT_TRUE(h.model->Forward({&eager, 1}, *h.kv, *h.st, &a).ok());
    BatchSeq lazy{0, 4, h.Pages(0), 6 + k, {u.data(), u.size()}, true, &log.seqs[0], k};
    ForwardOutput b;
    ReplayLog lazy_log;  // the lazy forward's log covers the run from slot 0: the k prefix rows, then u
    ForwardOptions lazy_opt;
    lazy_opt.replay = &lazy_log;
    ASSERT_TRUE(h.model->Forward({&lazy, 1}, *h.kv, *h.st, &b, lazy_opt).ok());
    EXPECT_TRUE(SameBits(a.logits, b.logits)) << "k = " << k;
    EXPECT_TRUE(SameBits(h.st->SlotData(3), h.st->SlotData(4))) << "k = " << k;
    EXPECT_TRUE(SameBits(h.st->SlotData(0), start)) << "k = " << k;
    ASSERT_EQ(lazy_log.seqs[0].n_tokens, k + static_cast<int32_t>(u.size()));
    ASSERT_TRUE(h.model->ReplayState(0, 2, lazy_log.seqs[0], lazy_log.seqs[0].n_tokens, *h.st).ok());
    EXPECT_TRUE(SameBits(h.st->SlotData(2), h.st->SlotData(4))) << "k = " << k;
  }
  // In place (state_in == state_out), and bad prefixes are errors.
  ASSERT_TRUE(h.model->ReplayState(0, 2, log.seqs[0], 2, *h.st).ok());
  BatchSeq eager{2, 2, h.Pages(0), 8, {u.data(), u.size()}, false};
  ForwardOutput a, b;
  ASSERT_TRUE(h.model->Forward({&eager, 1}, *h.kv, *h.st, &a).ok());
  BatchSeq lazy{0, 0, h.Pages(0), 8, {u.data(), u.size()}, false, &log.seqs[0], 2};
  ASSERT_TRUE(h.model->Forward({&lazy, 1}, *h.kv, *h.st, &b).ok());
  EXPECT_TRUE(SameBits(a.logits, b.logits));
  EXPECT_TRUE(SameBits(h.st->SlotData(0), h.st->SlotData(2)));
  BatchSeq too_many{1, 2, h.Pages(0), 8, {u.data(), u.size()}, false, &log.seqs[0], 7};
  EXPECT_FALSE(h.model->Forward({&too_many, 1}, *h.kv, *h.st, &b).ok());
  BatchSeq no_state{-1, 2, h.Pages(0), 0, {u.data(), u.size()}, false, &log.seqs[0], 1};
  EXPECT_FALSE(h.model->Forward({&no_state, 1}, *h.kv, *h.st, &b).ok());
}

TEST(Replay, FusedIntoTheNextForwardGivesTheSameBitsQwen35) { CheckFusedReplay("tiny-qwen35-f32.gguf"); }
TEST(Replay, FusedIntoTheNextForwardGivesTheSameBitsQwen3Next) { CheckFusedReplay("tiny-qwen3next-f32.gguf"); }
TEST(Replay, FusedIntoTheNextForwardGivesTheSameBitsQuantised) { CheckFusedReplay("tiny-qwen35-q8_0.gguf"); }
TEST(Replay, FusedIntoTheNextForwardGivesTheSameBitsNemotronH) { CheckFusedReplay("tiny-nemotron-h-f32.gguf"); }
TEST(Replay, FusedIntoTheNextForwardGivesTheSameBitsNemotronHMoe) {
  CheckFusedReplay("tiny-nemotron-h-moe-f32.gguf");
}
TEST(Replay, FusedIntoTheNextForwardGivesTheSameBitsGraniteHybrid) { CheckFusedReplay("tiny-granite-h-f32.gguf"); }
TEST(Replay, FusedIntoTheNextForwardGivesTheSameBitsLfm2) { CheckFusedReplay("tiny-lfm2-f32.gguf"); }
TEST(Replay, FusedIntoTheNextForwardGivesTheSameBitsLfm2Moe) { CheckFusedReplay("tiny-lfm2-moe-f32.gguf"); }
TEST(Replay, FusedIntoTheNextForwardGivesTheSameBitsKimiLinear) { CheckFusedReplay("tiny-kimi-linear-f32.gguf"); }
TEST(Replay, FusedIntoTheNextForwardGivesTheSameBitsGraniteHybridMoe) {
  CheckFusedReplay("tiny-granite-h-moe-f32.gguf");
}

TEST(Forward, BadInputIsAnErrorAndChangesNothing) {
  Harness h("tiny-qwen35-f32.gguf", 32, KvType::kF16);
  const auto t = Prompt(4, 3, h.model->config().n_vocab);
  h.Run(t, {4}, 0);
  const auto before = std::vector<float>(h.st->SlotData(0).begin(), h.st->SlotData(0).end());
  ForwardOutput out;
  const int32_t bad_tok[] = {1, 999999};
  BatchSeq b{0, 0, h.Pages(0), 4, bad_tok, false};
  EXPECT_FALSE(h.model->Forward({&b, 1}, *h.kv, *h.st, &out).ok());
  const int32_t ok_tok[] = {1};
  BatchSeq c{0, 7, h.Pages(0), 4, ok_tok, false};  // slot out of range
  EXPECT_FALSE(h.model->Forward({&c, 1}, *h.kv, *h.st, &out).ok());
  BatchSeq d{0, 0, h.Pages(0).subspan(0, 1), 40, ok_tok, false};  // page table too short
  EXPECT_FALSE(h.model->Forward({&d, 1}, *h.kv, *h.st, &out).ok());
  BatchSeq e1{-1, 1, h.Pages(1), 0, ok_tok, false}, e2{-1, 1, h.Pages(2), 0, ok_tok, false};  // same state_out
  BatchSeq both[] = {e1, e2};
  EXPECT_FALSE(h.model->Forward(both, *h.kv, *h.st, &out).ok());
  EXPECT_TRUE(SameBits(h.st->SlotData(0), before));
}

}  // namespace
}  // namespace rw::model
