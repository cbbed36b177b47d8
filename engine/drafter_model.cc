// Draft-model drafter: a second, smaller GGUF with the target's vocabulary drafts greedily with its own
// hybrid memory per sequence (a private growable KV and two recurrent-state slots).
//
// Exact rollback without re-evaluation and without per-token state copies (the replay log, model/forward.h):
// the state at `base_pos` stays in slot `base`; the draft tokens of a round run in slot `cur` with the replay
// log recorded; Rollback(n) rebuilds the state at n from `base` and the first n - base_pos logged tokens
// (bit-identical to having evaluated only those). Everything evaluated before a Draft call is committed when
// it starts (`base` and `cur` swap, the log is dropped): Draft first rolls back to the longest evaluated
// prefix of its context. Tokens not evaluated yet (the prompt, the accepted last draft, the target's own
// token) are evaluated in one logged batch (long prompts: committed chunks without a log first).
#include <algorithm>
#include <map>
#include <string>

#include "base/log.h"
#include "engine/drafter.h"
#include "engine/drafter_kv.h"
#include "kernels/kv_quant.h"
#include "model/forward.h"

namespace rw::engine {
namespace {

class ModelDrafter final : public Drafter {
 public:
  explicit ModelDrafter(std::unique_ptr<model::Model> draft) : draft_(std::move(draft)) {}

  const char* name() const override { return "draft"; }
  std::string device() const override { return draft_->device_description(); }
  // Its weights and scratch, and per sequence two state slots and a KV that grows by doubling its pages (so up
  // to twice the pages of n_ctx tokens).
  uint64_t device_bytes(int32_t n_ctx, int32_t n_seqs) const override {
    if (draft_->device_name() == "cpu") return 0;
    const model::StateShape sh = draft_->MakeStateShape();
    const int32_t pages = 2 * ((n_ctx + kPageSize - 1) / kPageSize + 1);
    const model::KvStorageConfig kc = draft_->MakeKvConfig(pages, kPageSize);
    const uint64_t kv = static_cast<uint64_t>(kc.n_layers) * kc.page_size * pages *
                        (kernels::KvRowBytes(kc.type.k, kc.row_width) + kernels::KvRowBytes(kc.type.v, kc.row_width));
    return draft_->device_bytes() + static_cast<uint64_t>(n_seqs) * (kv + 2 * sh.bytes_per_state());
  }

  void Begin(int32_t key, std::span<const int32_t>) override {
    seqs_.erase(key);
    (void)Get(key);
  }
  // The drafter learns the accepted tokens from Draft's context; the target's batches are not needed.
  void Observe(int32_t, int32_t, std::span<const int32_t>, std::span<const float>) override {}

  std::vector<int32_t> Draft(int32_t key, std::span<const int32_t> context, int32_t n_max) override {
    if (n_max <= 0 || context.empty()) return {};
    Seq* s = Get(key);
    if (s == nullptr) return {};
    // Keep the longest evaluated prefix of the context, leaving at least its last token to evaluate.
    const int32_t L = static_cast<int32_t>(context.size());
    int32_t m = 0;
    const int32_t lim = std::min<int32_t>(s->n_eval, L - 1);
    while (m < lim && s->tokens[m] == context[m]) ++m;
    std::vector<int32_t> out;
    if (!RollbackTo(*s, m)) return Reset(key, out);
    Commit(*s);
    if (!s->kv.Reserve(int64_t{L} + n_max).ok()) return Reset(key, out);
    // Catch up on the context (n_eval <= m: 0 after a rollback before the base). Long spans are committed
    // chunk by chunk; the last chunk is logged, so a later Draft of the same context can roll back into it.
    int32_t p = s->n_eval;
    for (; L - p > kChunk; p += kChunk)
      if (!Eval(*s, context.subspan(p, kChunk), /*speculative=*/false)) return Reset(key, out);
    if (!Eval(*s, context.subspan(p, L - p), /*speculative=*/true)) return Reset(key, out);
    out.push_back(internal::ArgMax(out_.Row(0)));
    while (static_cast<int32_t>(out.size()) < n_max) {
      const int32_t tok = out.back();
      if (!Eval(*s, std::span<const int32_t>(&tok, 1), /*speculative=*/true)) break;
      out.push_back(internal::ArgMax(out_.Row(0)));
    }
    return out;
  }

  void Rollback(int32_t key, int32_t n_kept) override {
    auto it = seqs_.find(key);
    if (it == seqs_.end()) return;
    if (!RollbackTo(it->second, std::max(0, n_kept))) seqs_.erase(it);  // rebuilt from the context next time
  }

  void End(int32_t key) override { seqs_.erase(key); }

 private:
  static constexpr int32_t kPageSize = 64;
  static constexpr int32_t kChunk = 256;  // committed evaluation chunk (bounds the forward's scratch)

  struct Seq {
    Seq(const model::KvStorageConfig& shape, std::unique_ptr<model::StateStorage> s)
        : kv(shape), states(std::move(s)) {}
    internal::GrowableKv kv;
    std::unique_ptr<model::StateStorage> states;  // 2 slots: base and cur
    std::vector<int32_t> tokens;                  // [n_eval] evaluated tokens
    int32_t n_eval = 0;
    int32_t base_pos = 0;  // slot `base` holds the state after tokens [0, base_pos) (zero state when 0)
    int32_t base = 0, cur = 1;
    model::ReplaySeqLog log;  // tokens [base_pos, n_eval), evaluated in slot `cur` from `base`
  };

  Seq* Get(int32_t key) {
    auto it = seqs_.find(key);
    if (it != seqs_.end()) return &it->second;
    auto states = model::StateStorage::Create(draft_->MakeStateShape(), 2);
    if (!states.ok()) {
      LOG_WARN("draft-model drafter: %s", states.error().ToString().c_str());
      return nullptr;
    }
    return &seqs_.emplace(key, Seq(draft_->MakeKvConfig(0, kPageSize), std::move(states).value()))
                .first->second;
  }

  std::vector<int32_t> Reset(int32_t key, std::vector<int32_t>& partial) {
    seqs_.erase(key);
    partial.clear();
    return {};
  }

  int32_t StateIn(const Seq& s) const {
    if (s.n_eval > s.base_pos) return s.cur;
    return s.base_pos == 0 ? -1 : s.base;
  }

  // Evaluates tokens at n_eval; the next-token logits of the last one land in out_. Committed evaluation runs
  // in place in `base` (requires no pending log); speculative evaluation runs in `cur` and extends the log.
  bool Eval(Seq& s, std::span<const int32_t> tokens, bool speculative) {
    model::BatchSeq b;
    b.pages = s.kv.pages();
    b.pos0 = s.n_eval;
    b.tokens = tokens;
    b.state_in = StateIn(s);
    b.state_out = speculative ? s.cur : s.base;
    model::ForwardOptions opt;
    opt.replay = speculative ? &replay_ : nullptr;
    Status st = s.kv.Reserve(int64_t{s.n_eval} + static_cast<int64_t>(tokens.size()));
    if (st.ok())
      st = draft_->Forward(std::span<const model::BatchSeq>(&b, 1), s.kv.kv(), *s.states, &out_, opt);
    if (!st.ok()) {
      LOG_WARN("draft-model drafter: %s", st.error().ToString().c_str());
      return false;
    }
    const int32_t n = static_cast<int32_t>(tokens.size());
    s.tokens.insert(s.tokens.end(), tokens.begin(), tokens.end());
    s.n_eval += n;
    if (speculative) {
      // Where the draft model keeps its log rows (host or device), the model appends them there.
      st = draft_->AppendReplay(s.log, replay_.seqs[0]);
      if (!st.ok()) {
        LOG_WARN("draft-model drafter: %s", st.error().ToString().c_str());
        return false;
      }
    } else {
      s.base_pos = s.n_eval;
    }
    return true;
  }

  // Accepts everything evaluated: the state at n_eval becomes the base.
  void Commit(Seq& s) {
    if (s.n_eval > s.base_pos) std::swap(s.base, s.cur);
    s.base_pos = s.n_eval;
    s.log = {};
  }

  // Keeps tokens [0, n): replays the log from the base when n is inside the speculative part; forgets
  // everything when n is before the base (then the context is re-evaluated from the start on the next Draft).
  bool RollbackTo(Seq& s, int32_t n) {
    if (n >= s.n_eval) return true;
    if (n < s.base_pos) {
      s.n_eval = s.base_pos = 0;
      s.tokens.clear();
      s.log = {};
      return true;
    }
    const int32_t k = n - s.base_pos;
    if (k > 0) {
      Status st = draft_->ReplayState(s.base_pos == 0 ? -1 : s.base, s.cur, s.log, k, *s.states);
      if (!st.ok()) {
        LOG_WARN("draft-model drafter: %s", st.error().ToString().c_str());
        return false;
      }
      s.log.Truncate(k);
    } else {
      s.log = {};
    }
    s.n_eval = n;
    s.tokens.resize(n);
    return true;
  }

  std::unique_ptr<model::Model> draft_;
  std::map<int32_t, Seq> seqs_;
  model::ForwardOutput out_;
  model::ReplayLog replay_;
};

}  // namespace

Expected<std::unique_ptr<Drafter>> MakeModelDrafter(const std::string& path, model::Model& target,
                                                    int32_t n_threads) {
  // The draft runs where the target runs (its KV, states and replay log then live on that device too); a draft
  // the device cannot run (another architecture, a weight type it lacks) falls back to the CPU, with a warning.
  model::LoadOptions lo;
  lo.n_threads = std::max(1, n_threads);
  lo.device = target.device_index();
  auto draft = model::Model::Load(path, lo);
  if (!draft.ok() && lo.device >= 0 && draft.error().kind == ErrorKind::kUnsupported) {
    LOG_WARN("draft model '%s' runs on the CPU: %s", path.c_str(), draft.error().message.c_str());
    lo.device = -1;
    draft = model::Model::Load(path, lo);
  }
  if (!draft.ok()) {
    Error e = draft.error();
    e.message = "draft model '" + path + "': " + e.message;
    return e;
  }
  const int32_t nv = (*draft)->config().n_vocab, want = target.config().n_vocab;
  if (nv != want)
    return Error::InvalidArgument("draft model '" + path + "' has a vocabulary of " + std::to_string(nv) +
                                  " tokens, the target has " + std::to_string(want) +
                                  ": a draft model must share the target's vocabulary");
  return std::unique_ptr<Drafter>(std::make_unique<ModelDrafter>(std::move(draft).value()));
}

}  // namespace rw::engine
