// Speculative decoding in the engine: how many tokens to draft, verification of a drafted batch against the
// target's rows (accept, then exact rollback of the rest), and the back-off that keeps drafting only while it
// pays. The drafters themselves are drafter_*.cc.
#include "engine/engine_impl.h"
#include "engine/engine_images.h"

#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <filesystem>
#include <future>
#include <limits>
#include <sstream>
#include <thread>

#include "base/cache_root.h"
#include "base/cpu_features.h"
#include "base/file.h"
#include "base/hex.h"
#include "base/log.h"
#include "base/timer.h"
#include "tokenizer/tokenizer.h"

namespace rw::engine {
namespace {

// Longest speculation back-off, in decode steps: a useless drafter costs one probe round per this many steps.
constexpr int32_t kMaxBackoff = 256;

}  // namespace

// Speculation must pay for itself: per request, the seconds per emitted token of drafted rounds (drafting,
// verification, rollback) are compared with those of plain steps; while drafting is slower it backs off
// (exponentially, up to kMaxBackoff steps) and then probes again. Plain steps are measured first and now and then.
void EngineImpl::UpdateDraftCost(const std::vector<DecodeCost>& costs, double seconds) {
  for (const DecodeCost& c : costs) {
    Active* a = slots_[c.slot].get();
    if (a == nullptr || a->id != c.id || a->generated.size() <= c.generated_before) continue;
    const double spt = seconds / static_cast<double>(a->generated.size() - c.generated_before);
    double& avg = c.drafted ? a->spec_spt : a->plain_spt;
    avg = avg > 0 ? 0.7 * avg + 0.3 * spt : spt;
    ++(c.drafted ? a->spec_rounds : a->plain_steps);
    if (!c.drafted || a->plain_spt <= 0) continue;
    if (a->spec_spt > a->plain_spt) {
      a->skip = std::max(a->skip, a->backoff);
      a->backoff = std::min(a->backoff * 2, kMaxBackoff);
      a->spec_spt = 0;  // measured afresh by the next probe
    } else if (a->last_accepted > 0) {
      a->backoff = 1;  // paid off and accepted something: draft every step again
    }
  }
}

int32_t EngineImpl::PlanDraft(Active& a) const {
  if (drafters_.empty()) return 0;
  if (a.skip > 0) {
    --a.skip;
    return 0;
  }
  // Plain steps to measure against (UpdateDraftCost): the first three, then one in every 32 rounds.
  if (a.plain_steps < 3 || (a.plain_steps + a.spec_rounds) % 32 == 31) return 0;
  int32_t n = a.draft_len;
  // Never draft past what the request may still generate or what the context holds.
  if (a.request.max_tokens >= 0)
    n = std::min<int32_t>(n, a.request.max_tokens - static_cast<int32_t>(a.generated.size()) - 1);
  n = std::min<int32_t>(n, info_.n_ctx - a.n_evaluated - 2);
  return std::max<int32_t>(n, 0);
}

void EngineImpl::VerifyDraft(size_t slot, const model::ForwardOutput& out, int32_t first_row, int32_t pos0,
                             std::span<const int32_t> item_tokens) {
  Active& a = *slots_[slot];
  const int32_t n_draft = static_cast<int32_t>(item_tokens.size()) - 1;
  const uint64_t id = a.id;
  int32_t accepted = 0;
  bool alive = true;
  bool synth = config_.spec_synth_accept >= 0;
  for (int32_t i = 0; i <= n_draft && alive; ++i) {
    const SampleRow row = RowOf(out, first_row + i);
    if (i == n_draft) {  // every draft token accepted: the last row gives one more token for free
      int32_t t = a.sampler->Sample(row);
      alive = EmitToken(slot, a, t, row);
      if (alive) a.pending_token = t;
      break;
    }
    const int32_t d = item_tokens[i + 1];
    bool ok = false;
    int32_t t;
    if (synth) {
      ok = a.sampler->Uniform() < config_.spec_synth_accept;
      t = ok ? d : a.sampler->Sample(row);
      if (!ok && t == d) t = (d + 1) % info_.n_vocab;
    } else {
      t = a.sampler->SpeculativeStep(row, d, &ok);
    }
    counters_.spec_drafted_at[std::min(i, 63)]++;
    if (ok) {
      ++accepted;
      counters_.spec_accepted_at[std::min(i, 63)]++;
      alive = EmitToken(slot, a, t, row);
    } else {
      alive = EmitToken(slot, a, t, row);
      if (alive) a.pending_token = t;
      break;
    }
  }
  counters_.spec_rounds++;
  counters_.spec_drafted += n_draft;
  counters_.spec_accepted += accepted;
  // The request may have finished inside the loop (its sequence is released with everything evaluated; the
  // rejected tail then sits in the cache after the final state, which is harmless since the tree keys on tokens
  // and Release rolled nothing back). Only a live request needs its rejected tail removed.
  if (!slots_[slot] || slots_[slot]->id != id) return;
  a.drafted += n_draft;
  a.accepted += accepted;
  const int32_t keep = pos0 + 1 + accepted;
  if (keep < a.n_evaluated) {
    double t0 = NowSeconds();
    auto tr = cache_->Truncate(a.seq, keep);
    counters_.rollback_seconds += NowSeconds() - t0;
    counters_.spec_rollbacks++;
    if (!tr.ok()) {
      Finish(slot, "error", tr.error());
      return;
    }
    for (auto& d : drafters_) d->Rollback(static_cast<int32_t>(slot), keep);
    a.n_evaluated = tr->resume_pos;
    if (!tr->refeed.empty()) {  // no exact state at keep (should not happen inside one batch): re-evaluate
      EvalItem item{a.seq, tr->refeed, false};
      model::ForwardOutput tmp;
      Status st = cache_->Evaluate({&item, 1}, &tmp);
      if (!st.ok()) {
        Finish(slot, "error", st.error());
        return;
      }
      a.n_evaluated += static_cast<int32_t>(tr->refeed.size());
    }
  }
  // Adaptive draft length: grow after full acceptance, shrink to what was accepted. From the second round in
  // a row that accepted nothing, drafting backs off (x4 each time, up to kMaxBackoff steps); UpdateDraftCost
  // backs off too after rounds that cost more than they gave. A drafter that is almost always wrong thus costs
  // a probe round now and then.
  a.last_accepted = accepted;
  if (accepted == n_draft) {
    a.draft_len = std::min<int32_t>(std::max(1, config_.draft_max), a.draft_len + 2);
  } else {
    a.draft_len = std::max<int32_t>(1, accepted + 1);
  }
  a.fail_streak = accepted == 0 ? a.fail_streak + 1 : 0;
  if (a.fail_streak >= 2) {
    a.skip = std::max(a.skip, a.backoff);
    a.backoff = std::min(a.backoff * 4, kMaxBackoff);
  }
}

}  // namespace rw::engine
