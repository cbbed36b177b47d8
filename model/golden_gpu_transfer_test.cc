// The GPU forward's traffic with the host (docs/gpu.md "Where the bytes live"): speculative rollbacks through
// the replay log on the device, checkpoint copies, top-k downloads, and a discrete GPU's staged transfers, each
// checked against the bits of the plain path. Skips with a message where no Vulkan device exists.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <span>

#include "gpu/device.h"
#if REWIND_HAVE_VULKAN
#include "gpu/vk_context.h"  // transfer counters, UnmapDeviceBuffersForTesting
#include "model/gpu_storage.h"  // DeviceStates::StageReadsForTesting
#endif
#include "kernels/top_logits.h"
#include "model/forward.h"
#include "model/golden_gpu_testing.h"

namespace rw::model {
namespace {

struct PromptInSlot0 {
  PromptInSlot0(Model& m, int32_t slots) {
    auto k = KvStorage::Create(m.MakeKvConfig(4, 16, KvType::kF32));
    auto s = StateStorage::Create(m.MakeStateShape(), slots);
    EXPECT_TRUE(k.ok() && s.ok());
    if (!k.ok() || !s.ok()) return;
    b.state_in = -1;
    b.state_out = 0;
    b.pages = pages;
    b.tokens = prompt;
    EXPECT_TRUE(m.Forward({&b, 1}, **k, **s, &out).ok());
    kv = std::move(*k);
    st = std::move(*s);
  }
  // A slot's floats, through the const view (a device-resident slot is read down).
  std::vector<float> Slot(int32_t s) const {
    const StateStorage& c = *st;
    return std::vector<float>(c.SlotData(s).begin(), c.SlotData(s).end());
  }
  const std::vector<int32_t> pages = {0}, prompt = {3, 17, 250};
  std::unique_ptr<KvStorage> kv;
  std::unique_ptr<StateStorage> st;
  BatchSeq b;
  ForwardOutput out;
};

#if REWIND_HAVE_VULKAN  // gpu::Context's transfer counters
// The replay log lives on the device (model/gpu_storage.h, DeviceReplayRows): a speculative verify that records
// it downloads only its logits, a rollback (ReplayState) uploads only its one-entry run table, and a lazy
// rollback fused into the next forward (BatchSeq::prefix) uploads what the same forward without the prefix
// uploads plus that table: no log byte crosses between the host and the device. The rolled-back states and the
// fused forward's logits are the bits of running the kept tokens directly (I1).
TEST(GoldenGpu, SpeculativeRollbackMovesNoReplayLogBytesThroughTheHost) {
  std::string why;
  if (!HaveDevice(&why)) GTEST_SKIP() << "no Vulkan device: " << why;
  std::unique_ptr<Model> loaded = LoadQ8OnVulkan0();
  ASSERT_TRUE(loaded);
  Model& m = *loaded;
  auto ctx = gpu::OpenDevice(0);  // the model's context (one per device): its transfer counters
  ASSERT_TRUE(ctx.ok());
  gpu::Context& c = **ctx;
  PromptInSlot0 t(m, 6);
  ASSERT_TRUE(t.kv && t.st);
  BatchSeq& b = t.b;
  ForwardOutput& out = t.out;
  const std::vector<int32_t> verify = {9, 41, 77, 5}, next = {88};
  const int32_t k = 2;  // drafts kept
  const int32_t V = m.config().n_vocab;
  for (int32_t s : {2, 3, 4}) t.st->CopySlot(0, s);  // device copies of the batch-start state

  // Verify: all logits, from slot 0 into slot 1, recording the log.
  ReplayLog log;
  ForwardOptions fo;
  fo.replay = &log;
  b.state_in = 0;
  b.state_out = 1;
  b.pos0 = 3;
  b.tokens = verify;
  b.all_logits = true;
  const uint64_t down0 = c.bytes_downloaded(), rd0 = m.replay_bytes_to_device();
  ASSERT_TRUE(m.Forward({&b, 1}, *t.kv, *t.st, &out, fo).ok());
  ASSERT_EQ(log.seqs.size(), 1u);
  EXPECT_EQ(log.seqs[0].n_tokens, 4);
  EXPECT_NE(log.seqs[0].device, nullptr) << "the log is recorded on the device";
  EXPECT_TRUE(log.seqs[0].rows.empty()) << "no host copy of the log";
  EXPECT_EQ(c.bytes_downloaded() - down0, 4u * 4 * V) << "the verify downloaded more than its logits";

  // Rollback to k kept drafts, in place in the batch-start slot (what the engine does without lazy rollback).
  const uint64_t up1 = c.bytes_uploaded(), down1 = c.bytes_downloaded();
  ASSERT_TRUE(m.ReplayState(0, 0, log.seqs[0], k, *t.st).ok());
  EXPECT_EQ(c.bytes_uploaded() - up1, 16u) << "a rollback uploads its run table only";
  EXPECT_EQ(c.bytes_downloaded() - down1, 0u);

  // Lazy rollback: slot 3 (the batch-start state) with the k logged rows fused into the next forward, which
  // records its own log (prefix rows copied on the device); against slot 2 running the kept drafts directly.
  BatchSeq f;
  f.state_in = 3;
  f.state_out = 3;
  f.pages = t.pages;
  f.pos0 = 3 + k;
  f.tokens = next;
  f.prefix = &log.seqs[0];
  f.prefix_rows = k;
  ReplayLog log2;
  ForwardOptions fo2;
  fo2.replay = &log2;
  ForwardOutput fused, plain, ref;
  const uint64_t up2 = c.bytes_uploaded(), down2 = c.bytes_downloaded();
  ASSERT_TRUE(m.Forward({&f, 1}, *t.kv, *t.st, &fused, fo2).ok());
  const uint64_t fused_up = c.bytes_uploaded() - up2, fused_down = c.bytes_downloaded() - down2;
  EXPECT_EQ(m.replay_bytes_to_device(), rd0);

  // The reference: slot 2 runs the kept drafts, then the same next token with a log (the same upload shape).
  b.state_in = 2;
  b.state_out = 2;
  b.tokens = std::span<const int32_t>(verify).first(k);
  b.all_logits = false;
  ASSERT_TRUE(m.Forward({&b, 1}, *t.kv, *t.st, &ref).ok());
  const std::vector<float> kept = t.Slot(2);
  EXPECT_EQ(t.Slot(0), kept) << "ReplayState vs the forward of the kept drafts";
  BatchSeq p = f;
  p.state_in = 2;
  p.state_out = 2;
  p.prefix = nullptr;
  p.prefix_rows = 0;
  ReplayLog log3;
  ForwardOptions fo3;
  fo3.replay = &log3;
  const uint64_t up3 = c.bytes_uploaded(), down3 = c.bytes_downloaded();
  ASSERT_TRUE(m.Forward({&p, 1}, *t.kv, *t.st, &plain, fo3).ok());
  EXPECT_EQ(fused_up, c.bytes_uploaded() - up3 + 16u) << "the fused rollback uploaded more than its run table";
  EXPECT_EQ(fused_down, c.bytes_downloaded() - down3);
  EXPECT_EQ(fused.logits, plain.logits);
  const std::vector<float> after = t.Slot(2);
  EXPECT_EQ(t.Slot(3), after);
  // The fused forward's log (k prefix rows, then its own) rebuilds its state from the batch-start state.
  ASSERT_EQ(log2.seqs[0].n_tokens, k + 1);
  ASSERT_TRUE(m.ReplayState(4, 5, log2.seqs[0], k + 1, *t.st).ok());
  EXPECT_EQ(t.Slot(5), after);
  ASSERT_TRUE(m.ReplayState(4, 4, log2.seqs[0], k, *t.st).ok());
  EXPECT_EQ(t.Slot(4), kept);
  EXPECT_NE(kept, after) << "the token changed the state";
  EXPECT_EQ(m.replay_bytes_to_device(), rd0);
}
#endif  // REWIND_HAVE_VULKAN

// A draft model's log grows by a forward at a time (Model::AppendReplay, on the device: copies between the
// logs' device buffers, growing them) and is trimmed (ReplaySeqLog::Truncate): a rollback from it gives the
// bits of running the kept tokens directly, with no log byte through the host.
TEST(GoldenGpu, AppendedReplayLogsRollBackOnTheDevice) {
  std::string why;
  if (!HaveDevice(&why)) GTEST_SKIP() << "no Vulkan device: " << why;
  std::unique_ptr<Model> loaded = LoadQ8OnVulkan0();
  ASSERT_TRUE(loaded);
  Model& m = *loaded;
  PromptInSlot0 t(m, 4);
  ASSERT_TRUE(t.kv && t.st);
  BatchSeq& b = t.b;
  ForwardOutput& out = t.out;
  const std::vector<int32_t> drafts = {9, 41, 77, 5, 64};
  t.st->CopySlot(0, 3);
  const uint64_t rd0 = m.replay_bytes_to_device();
  // Drafts evaluated from slot 0 into slot 1: one, two, then one at a time, each forward's log appended.
  ReplaySeqLog acc;
  ReplayLog step;
  ForwardOptions fo;
  fo.replay = &step;
  for (int32_t at = 0; at < 5;) {
    const int32_t n = at == 1 ? 2 : 1;
    b.state_in = at == 0 ? 0 : 1;
    b.state_out = 1;
    b.pos0 = 3 + at;
    b.tokens = std::span<const int32_t>(drafts).subspan(at, n);
    ASSERT_TRUE(m.Forward({&b, 1}, *t.kv, *t.st, &out, fo).ok());
    ASSERT_TRUE(m.AppendReplay(acc, step.seqs[0]).ok());
    at += n;
    EXPECT_EQ(acc.n_tokens, at);
  }
  EXPECT_TRUE(acc.rows.empty());
  ASSERT_NE(acc.device, nullptr);
  acc.Truncate(4);
  ASSERT_TRUE(m.ReplayState(0, 2, acc, 3, *t.st).ok());
  EXPECT_EQ(m.replay_bytes_to_device(), rd0);
  b.state_in = 3;
  b.state_out = 3;
  b.pos0 = 3;
  b.tokens = std::span<const int32_t>(drafts).first(3);
  ASSERT_TRUE(m.Forward({&b, 1}, *t.kv, *t.st, &out).ok());
  EXPECT_EQ(t.Slot(2), t.Slot(3));
  EXPECT_NE(t.Slot(2), t.Slot(0));
}

#if REWIND_HAVE_VULKAN
// A checkpoint of a device slot is an asynchronous copy (StateStorage::Snapshot, DeviceStates::ReadLater) on a
// device whose memory the host does not map (forced here on lavapipe's unified memory): it is
// recorded on the queue and Snapshot returns with the bytes not landed; the next forward, which changes the slot
// in place, runs after the copy (the checkpoint holds the state before it); the next Snapshot lands it without
// a wait, a Restore waits for its own copy; restored checkpoints go on with the bits of the slots they copied.
TEST(GoldenGpu, CheckpointCopiesRunWithTheNextForward) {
  std::string why;
  if (!HaveDevice(&why)) GTEST_SKIP() << "no Vulkan device: " << why;
  std::unique_ptr<Model> loaded = LoadQ8OnVulkan0();
  ASSERT_TRUE(loaded);
  Model& m = *loaded;
  PromptInSlot0 t(m, 4);
  ASSERT_TRUE(t.kv && t.st);
  const StateStorage& cst = *t.st;
  BatchSeq& b = t.b;
  ForwardOutput& out = t.out;
  const std::vector<int32_t> next = {9}, more = {41};
  // On unified memory (lavapipe) a snapshot is one memcpy out of the mapped slots; the staged asynchronous copy
  // a discrete device takes is forced here.
  auto* dev = dynamic_cast<vk::DeviceStates*>(cst.device());
  ASSERT_NE(dev, nullptr);
  dev->StageReadsForTesting(true);
  t.st->CopySlot(0, 2);  // the state at the first checkpoint, on the device
  StateCheckpoint ck = cst.Snapshot(0);
  EXPECT_TRUE(ck.pending()) << "the checkpoint's copy was waited for";
  EXPECT_EQ(ck.bytes(), cst.bytes_per_state());
  b.state_in = 0;
  b.pos0 = 3;
  b.tokens = next;
  ASSERT_TRUE(m.Forward({&b, 1}, *t.kv, *t.st, &out).ok());  // slot 0 changes in place after the copy
  StateCheckpoint ck2 = cst.Snapshot(0);
  EXPECT_FALSE(ck.pending()) << "the next Snapshot lands the earlier copies";
  EXPECT_TRUE(ck2.pending());
  ASSERT_TRUE(t.st->Restore(ck2, 1).ok());  // waits for its own copy (no forward since)
  EXPECT_FALSE(ck2.pending());
  EXPECT_EQ(t.Slot(1), t.Slot(0));
  const std::vector<float> before = t.Slot(2);
  EXPECT_EQ(std::vector<float>(ck.data().begin(), ck.data().end()), before)
      << "the forward after the snapshot changed the checkpoint's bytes";
  EXPECT_NE(t.Slot(0), before) << "the token changed the state";
  ASSERT_TRUE(t.st->Restore(ck, 3).ok());
  ForwardOutput a, r;
  b.pos0 = 3;
  b.tokens = more;
  b.state_in = 2;
  b.state_out = 2;
  ASSERT_TRUE(m.Forward({&b, 1}, *t.kv, *t.st, &a).ok());
  b.state_in = 3;
  b.state_out = 3;
  ASSERT_TRUE(m.Forward({&b, 1}, *t.kv, *t.st, &r).ok());
  EXPECT_EQ(a.logits, r.logits);
  EXPECT_EQ(t.Slot(2), t.Slot(3));
}
#endif  // REWIND_HAVE_VULKAN


#if REWIND_HAVE_VULKAN  // gpu::Context's transfer counters
// ForwardOptions::top_k: the device selects each output row's best pairs and downloads only them; they are the
// host selection (kernels::TopLogits) of the same forward's full rows, bit for bit, on vulkan0 and on the CPU.
TEST(GoldenGpu, TopKRowsAreTheFullRowsBestPairsAndOnlyThePairsAreDownloaded) {
  std::string why;
  if (!HaveDevice(&why)) GTEST_SKIP() << "no Vulkan device: " << why;
  for (int32_t dev : {0, -1}) {
    LoadOptions lo;
    lo.device = dev;
    auto loaded = Model::Load(std::string(REWIND_TEST_DATA) + "/golden/models/tiny-qwen35-q8_0.gguf", lo);
    ASSERT_TRUE(loaded.ok()) << loaded.error().message;
    Model& m = **loaded;
    auto ctx = gpu::OpenDevice(0);  // the model's context (one per device): its transfer counters
    ASSERT_TRUE(ctx.ok());
    // lavapipe selects on the host (faster there): the device's selection pass is what a GPU runs.
    const bool as_gpu = (**ctx).chooses_as_a_gpu_for_testing();  // REWIND_GPU_AS_DISCRETE=1 sets it
    (**ctx).ChooseAsAGpuForTesting(as_gpu || dev == 0);
    PromptInSlot0 t(m, 4);
    ASSERT_TRUE(t.kv && t.st);
    const std::vector<int32_t> verify = {9, 41, 77, 5};
    BatchSeq& b = t.b;
    b.state_in = 0;
    b.pos0 = 3;
    b.tokens = verify;
    b.all_logits = true;
    b.state_out = 1;
    ForwardOutput full;
    ASSERT_TRUE(m.Forward({&b, 1}, *t.kv, *t.st, &full).ok());
    ASSERT_EQ(full.top_k, 0);
    const int32_t V = m.config().n_vocab;
    for (int32_t k : {1, 40, kernels::kMaxTopLogits}) {
      b.state_out = 2;
      ForwardOptions fo;
      fo.top_k = k;
      ForwardOutput top;
      const uint64_t down0 = (**ctx).bytes_downloaded();
      ASSERT_TRUE(m.Forward({&b, 1}, *t.kv, *t.st, &top, fo).ok());
      const uint64_t down = (**ctx).bytes_downloaded() - down0;
      const int32_t kk = std::min(k, V);
      ASSERT_EQ(top.top_k, kk);
      EXPECT_TRUE(top.logits.empty());
      ASSERT_EQ(top.top.size(), verify.size() * kk);
      if (dev == 0) EXPECT_EQ(down, 8 * verify.size() * kk) << "k " << k;
      std::vector<kernels::TopLogit> want(kk);
      for (int32_t r = 0; r < static_cast<int32_t>(verify.size()); ++r) {
        kernels::TopLogits(full.Row(r), kk, want.data());
        for (int32_t i = 0; i < kk; ++i) {
          EXPECT_EQ(top.Top(r)[i].id, want[i].id) << "device " << dev << " k " << k << " row " << r << " place " << i;
          EXPECT_EQ(std::memcmp(&top.Top(r)[i].logit, &want[i].logit, 4), 0) << "device " << dev << " row " << r;
        }
      }
    }
    ForwardOptions bad;
    bad.top_k = kernels::kMaxTopLogits + 1;
    ForwardOutput o;
    EXPECT_EQ(m.Forward({&b, 1}, *t.kv, *t.st, &o, bad).error().kind, ErrorKind::kInvalidArgument);
    (**ctx).ChooseAsAGpuForTesting(as_gpu);
  }
}


// On a discrete GPU the host does not map device memory, so every input of a forward (embeddings, sequence and
// page tables, RoPE rows) is staged: through the context's reused upload arena, its copies recorded with the
// step's dispatches. A decode step is then one submission (the wait for its logits) and allocates nothing once
// the first steps have sized the buffers; its logits and states are the mapped run's bits. (A unified-memory
// device, lavapipe, made to leave its device buffers unmapped.)
TEST(GoldenGpu, OnADiscreteGpuADecodeStepIsOneSubmissionAndAllocatesNothing) {
  std::string why;
  if (!HaveDevice(&why)) GTEST_SKIP() << "no Vulkan device: " << why;
  auto ctx = gpu::OpenDevice(0);
  ASSERT_TRUE(ctx.ok());
  gpu::Context& c = **ctx;
  const std::vector<int32_t> next = {11, 42, 7, 250, 99, 3, 18, 64};
  struct Run {
    std::vector<std::vector<float>> logits;
    std::vector<float> state;
    std::vector<uint64_t> submits, allocs;
  };
  auto decode = [&](bool unmapped) {
    Run r;
    c.UnmapDeviceBuffersForTesting(unmapped);
    std::unique_ptr<Model> m = LoadQ8OnVulkan0();
    if (m == nullptr) return r;
    PromptInSlot0 t(*m, 2);
    if (!t.kv || !t.st) return r;
    for (size_t i = 0; i < next.size(); ++i) {
      t.b.state_in = 0;
      t.b.state_out = 0;
      t.b.pos0 = 3 + static_cast<int32_t>(i);
      t.b.tokens = std::span<const int32_t>(&next[i], 1);
      ForwardOutput o;
      const uint64_t s0 = c.submits(), a0 = c.staging_allocs();
      EXPECT_TRUE(m->Forward({&t.b, 1}, *t.kv, *t.st, &o).ok());
      r.submits.push_back(c.submits() - s0);
      r.allocs.push_back(c.staging_allocs() - a0);
      r.logits.push_back(o.logits);
    }
    r.state = t.Slot(0);
    c.UnmapDeviceBuffersForTesting(false);
    return r;
  };
  const Run mapped = decode(false);
  const Run staged = decode(true);
  ASSERT_EQ(staged.logits.size(), next.size());
  ASSERT_EQ(mapped.logits.size(), next.size());
  for (size_t i = 0; i < next.size(); ++i) {
    EXPECT_EQ(staged.logits[i], mapped.logits[i]) << "step " << i;
    std::printf("step %zu: %llu submission(s), %llu staging allocation(s)\n", i,
                static_cast<unsigned long long>(staged.submits[i]), static_cast<unsigned long long>(staged.allocs[i]));
    if (i >= 2) {
      EXPECT_EQ(staged.submits[i], 1u) << "step " << i;
      EXPECT_EQ(staged.allocs[i], 0u) << "step " << i;
    }
  }
  EXPECT_EQ(staged.state, mapped.state);
}
#endif  // REWIND_HAVE_VULKAN

}  // namespace
}  // namespace rw::model
