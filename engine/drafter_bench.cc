// Prints the cost of one drafted token (MTP head, draft model) against one target decode step.
// usage: drafter_bench [model.gguf [draft.gguf [n_threads [context]]]]  (defaults, also for "": the tiny
// fixture, the model itself, 1, 64)
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "base/timer.h"
#include "engine/drafter.h"
#include "engine/drafter_kv.h"
#include "model/forward.h"

namespace {

using namespace rw;

int Fail(const std::string& what) {
  std::fprintf(stderr, "drafter_bench: %s\n", what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  auto arg = [&](int i) { return argc > i && argv[i][0] != '\0' ? std::string(argv[i]) : std::string(); };
  std::string path = arg(1);
  if (path.empty()) path = std::string(REWIND_SOURCE_DIR) + "/tests/data/golden/models/tiny-qwen35-f32.gguf";
  const std::string draft_path = arg(2).empty() ? path : arg(2);
  const int32_t threads = argc > 3 ? std::atoi(argv[3]) : 1;
  const int32_t n_ctx = argc > 4 ? std::atoi(argv[4]) : 64;
  const int32_t n_draft = 4, rounds = 20;
  model::LoadOptions lo;
  lo.n_threads = threads;
  auto target = model::Model::Load(path, lo);
  if (!target.ok()) return Fail(target.error().ToString());
  model::Model& m = **target;
  const int32_t V = m.config().n_vocab;
  std::vector<int32_t> ctx(n_ctx);
  for (int32_t i = 0; i < n_ctx; ++i) ctx[i] = (i * 37 + 11) % V;

  // Target: prefill, then single-token decode steps (with hidden rows, as the engine runs it for MTP).
  engine::internal::GrowableKv kv(m.MakeKvConfig(0, 64));
  if (!kv.Reserve(n_ctx + rounds + 1).ok()) return Fail("kv");
  auto states = model::StateStorage::Create(m.MakeStateShape(), 1);
  if (!states.ok()) return Fail(states.error().ToString());
  model::ForwardOptions fo;
  fo.hidden_all = true;
  model::ForwardOutput out;
  model::BatchSeq b;
  b.pages = kv.pages();
  b.tokens = ctx;
  if (!m.Forward(std::span<const model::BatchSeq>(&b, 1), kv.kv(), **states, &out, fo).ok())
    return Fail("prefill");
  const std::vector<float> hidden = out.hidden_all;
  b.state_in = 0;
  double t0 = NowSeconds();
  for (int32_t r = 0; r < rounds; ++r) {
    const int32_t tok = engine::internal::ArgMax(out.Row(0));
    b.pos0 = n_ctx + r;
    b.tokens = std::span<const int32_t>(&tok, 1);
    if (!m.Forward(std::span<const model::BatchSeq>(&b, 1), kv.kv(), **states, &out, fo).ok())
      return Fail("decode");
  }
  const double t_decode = (NowSeconds() - t0) / rounds;
  std::printf("model %s, %d threads, context %d\n", path.c_str(), threads, n_ctx);
  std::printf("target decode step:       %8.3f ms\n", 1e3 * t_decode);

  std::vector<int32_t> dctx = ctx;
  dctx.push_back(7);
  auto mtp = engine::MakeMtpDrafter(m, threads);
  if (mtp.ok()) {
    (*mtp)->Begin(0, ctx);
    (*mtp)->Observe(0, 0, ctx, hidden);
    (void)(*mtp)->Draft(0, dctx, n_draft);  // warm-up
    t0 = NowSeconds();
    for (int32_t r = 0; r < rounds; ++r) (void)(*mtp)->Draft(0, dctx, n_draft);
    const double t = (NowSeconds() - t0) / (rounds * n_draft);
    std::printf("MTP draft token:          %8.3f ms  (%.3f decode steps)\n", 1e3 * t, t / t_decode);
    // Observe of a verify batch [pending, d1..d4] (KV rows only).
    t0 = NowSeconds();
    for (int32_t r = 0; r < rounds; ++r) {
      (*mtp)->Observe(
          0, n_ctx, std::span<const int32_t>(dctx).subspan(n_ctx - 4, n_draft + 1),
          std::span<const float>(hidden).subspan(0, static_cast<size_t>(n_draft + 1) * m.config().n_embd));
      (*mtp)->Rollback(0, n_ctx);
    }
    std::printf("MTP observe of 5 rows:    %8.3f ms\n", 1e3 * (NowSeconds() - t0) / rounds);
  } else {
    std::printf("MTP: %s\n", mtp.error().ToString().c_str());
  }

  auto dm = engine::MakeModelDrafter(draft_path, m, threads);
  if (!dm.ok()) return Fail(dm.error().ToString());
  (*dm)->Begin(0, ctx);
  (void)(*dm)->Draft(0, dctx, n_draft);  // evaluates the context once
  std::vector<int32_t> next = dctx;
  next.push_back(9);
  t0 = NowSeconds();
  for (int32_t r = 0; r < rounds; ++r) {
    // Every draft rejected: replay-log rollback, then the next round drafts after the target's token.
    (*dm)->Rollback(0, n_ctx + 1);
    (void)(*dm)->Draft(0, next, n_draft);
  }
  const double t = (NowSeconds() - t0) / (rounds * n_draft);
  std::printf("draft-model draft token:  %8.3f ms  (%.3f decode steps; includes rollback)\n", 1e3 * t,
              t / t_decode);
  return 0;
}
