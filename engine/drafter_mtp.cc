// MTP drafter: the target's own NextN head (model/mtp.h, spec model-qwen35.md 8.2) drafts greedily.
//
// Per sequence it keeps the MTP block's attention KV (positions of the trunk) and a window of the trunk's
// final normed hidden rows. Pairing: the MTP row at position p consumes (token x_p, trunk hN at p-1; zeros at
// p = 0). Observe only records the target's tokens and hidden rows; the MTP KV rows of everything observed
// are written with those pairs in one batched forward when a draft needs them (Flush), so a request that is
// not drafting (speculation backed off) pays a row copy per step, not an MTP forward. Rows the drafter wrote
// while drafting are provisional and are overwritten by the trunk-paired ones at the next Flush. Draft feeds
// (pending token, hN of the last evaluated position), then each drafted token with the head's own hn.
// Rollback only moves the end of the valid prefix and of the recorded rows.
#include <algorithm>
#include <map>
#include <string>

#include "base/check.h"
#include "base/log.h"
#include "engine/drafter.h"
#include "engine/drafter_kv.h"
#include "model/forward.h"
#include "model/mtp.h"

namespace rw::engine {
namespace {

class MtpDrafter final : public Drafter {
 public:
  // Runs on `shared` (the target's pool: the engine calls drafters between forwards, on its own thread) when
  // it has n_threads threads, else on a pool of its own.
  MtpDrafter(std::unique_ptr<model::MtpHead> head, int32_t n_threads, kernels::ThreadPool* shared)
      : head_(std::move(head)), E_(head_->config().n_embd) {
    n_threads = std::max(1, n_threads);
    if (shared != nullptr && shared->size() == n_threads) {
      pool_ = shared;
    } else {
      own_pool_ = std::make_unique<kernels::ThreadPool>(n_threads);
      pool_ = own_pool_.get();
    }
  }

  const char* name() const override { return "mtp"; }
  bool wants_hidden() const override { return true; }

  void Begin(int32_t key, std::span<const int32_t> prompt) override {
    Seq& s = seqs_.insert_or_assign(key, Seq(head_->MakeKvConfig(0, kPageSize))).first->second;
    s.tokens.assign(prompt.begin(), prompt.end());
  }

  void Observe(int32_t key, int32_t pos0, std::span<const int32_t> tokens,
               std::span<const float> hidden) override {
    if (tokens.empty()) return;
    const int32_t n = static_cast<int32_t>(tokens.size());
    std::vector<float> zeros;
    if (hidden.empty()) {  // the target did not export hN: drafts degrade, nothing breaks
      if (!warned_) LOG_WARN("MTP drafter: Observe without the target's hidden rows; drafting on zeros");
      warned_ = true;
      zeros.assign(static_cast<size_t>(n) * E_, 0.0f);
      hidden = zeros;
    }
    REWIND_CHECK_MSG(hidden.size() == tokens.size() * E_, "MTP drafter: %zu hidden floats for %zu tokens",
                     hidden.size(), tokens.size());
    Seq& s = Get(key);
    if (s.tokens.size() < static_cast<size_t>(pos0) + n) s.tokens.resize(static_cast<size_t>(pos0) + n, 0);
    std::copy(tokens.begin(), tokens.end(), s.tokens.begin() + pos0);
    s.n_valid = std::min(s.n_valid, pos0);  // rows from pos0 on are (re)written by the next Flush
    if (pos0 > HidEnd(s)) {
      // A gap the target never showed us (a prefix served from its cache): write what is recorded, then the
      // gap's rows with zero hidden rows (Fill), and start a new record at pos0 - 1 (a zero row).
      if (!Fill(s, s.n_valid, pos0)) return;
      s.hid_pos0 = pos0 - 1;
      s.hid.assign(E_, 0.0f);
    } else if (pos0 < s.hid_pos0 + 1) {
      // Before the record (a rollback the drafter was not told of): keep only what pairs with pos0.
      s.hid_pos0 = pos0 - 1;
      s.hid.assign(E_, 0.0f);
    } else {
      s.hid.resize(static_cast<size_t>(pos0 - s.hid_pos0) * E_);  // drop recorded rows from pos0 on
    }
    s.hid.insert(s.hid.end(), hidden.begin(), hidden.end());
    // A long prompt is written in chunks as it arrives, so the record stays small.
    if (HidEnd(s) - s.n_valid >= kFillChunk) Flush(s, HidEnd(s));
  }

  std::vector<int32_t> Draft(int32_t key, std::span<const int32_t> context, int32_t n_max) override {
    if (n_max <= 0 || context.empty()) return {};
    Seq& s = Get(key);
    const int32_t pos = static_cast<int32_t>(context.size()) - 1;  // position of the pending token
    s.tokens.assign(context.begin(), context.end());
    if (s.n_valid > pos) s.n_valid = pos;  // Rollback was not called: same effect
    if (HidEnd(s) > pos) s.hid.resize(static_cast<size_t>(std::max(0, pos - s.hid_pos0)) * E_);
    if (!Flush(s, pos)) return {};
    if (s.n_valid < pos && !Fill(s, s.n_valid, pos)) return {};  // positions the target never showed us
    std::vector<float> hin(E_);                                  // [E]
    HiddenAt(s, pos - 1, hin.data());
    std::vector<int32_t> out;
    model::MtpOutput o;
    for (int32_t i = 0; i < n_max; ++i) {
      const int32_t tok = i == 0 ? context.back() : out.back();
      if (!Run(s, pos + i, std::span<const int32_t>(&tok, 1), hin, model::MtpOutputs::kLastRow, &o)) break;
      out.push_back(internal::ArgMax(o.logits));
      hin = o.hn;
    }
    return out;
  }

  void Rollback(int32_t key, int32_t n_kept) override {
    Seq& s = Get(key);
    s.n_valid = std::min(s.n_valid, std::max(0, n_kept));
    if (s.tokens.size() > static_cast<size_t>(std::max(0, n_kept))) s.tokens.resize(std::max(0, n_kept));
    // Hidden rows of rejected positions are dropped; the row of position n_kept - 1 stays pending.
    const int64_t keep = std::max<int64_t>(0, int64_t{n_kept} - s.hid_pos0);
    if (static_cast<int64_t>(s.hid.size()) > keep * E_) s.hid.resize(keep * E_);
  }

  void End(int32_t key) override { seqs_.erase(key); }

 private:
  static constexpr int32_t kPageSize = 64;
  static constexpr int32_t kFillChunk = 512;
  struct Seq {
    explicit Seq(const model::KvStorageConfig& shape) : kv(shape) {}
    internal::GrowableKv kv;  // MTP attention KV: rows [0, n_valid) are trunk-paired
    int32_t n_valid = 0;
    std::vector<int32_t> tokens;  // [positions] tokens seen (prompt, observed, context)
    // Trunk hN rows of positions [hid_pos0, HidEnd): the rows not yet written to the KV (from n_valid - 1,
    // for pairing) and those of the last written batch (a rollback into it needs them).
    int32_t hid_pos0 = -1;
    std::vector<float> hid;  // [rows][E]
  };

  int32_t HidEnd(const Seq& s) const { return s.hid_pos0 + static_cast<int32_t>(s.hid.size() / E_); }

  // Writes the KV rows [n_valid, to) in batched forwards (Fill: recorded hidden rows, zeros where none), then
  // drops recorded rows older than the written rows' first pairing row.
  bool Flush(Seq& s, int32_t to) {
    const int32_t from = s.n_valid;
    if (!Fill(s, from, std::min(to, HidEnd(s)))) return false;
    const int32_t keep_from = std::max(s.hid_pos0, from - 1);
    if (keep_from > s.hid_pos0 && keep_from <= HidEnd(s)) {
      s.hid.erase(s.hid.begin(), s.hid.begin() + static_cast<int64_t>(keep_from - s.hid_pos0) * E_);
      s.hid_pos0 = keep_from;
    }
    return true;
  }

  Seq& Get(int32_t key) {
    auto it = seqs_.find(key);
    if (it == seqs_.end()) it = seqs_.emplace(key, Seq(head_->MakeKvConfig(0, kPageSize))).first;
    return it->second;
  }

  // The trunk hN row of position p, zeros when p < 0 or it is not kept.
  void HiddenAt(const Seq& s, int32_t p, float* dst) const {
    const int64_t r = int64_t{p} - s.hid_pos0;
    if (p >= 0 && r >= 0 && (r + 1) * E_ <= static_cast<int64_t>(s.hid.size())) {
      std::copy_n(s.hid.data() + r * E_, E_, dst);
    } else {
      std::fill_n(dst, E_, 0.0f);
    }
  }

  // Writes KV rows [from, to) for tokens the target evaluated without showing them to the drafter: the known
  // token ids (0 where unknown), with the kept hidden rows where available, else zeros. Degrades drafts only.
  bool Fill(Seq& s, int32_t from, int32_t to) {
    for (int32_t p0 = from; p0 < to; p0 += kFillChunk) {
      const int32_t n = std::min(kFillChunk, to - p0);
      std::vector<int32_t> toks(n, 0);
      std::vector<float> hin(static_cast<size_t>(n) * E_);  // [n][E]
      for (int32_t p = p0; p < p0 + n; ++p) {
        if (static_cast<size_t>(p) < s.tokens.size()) toks[p - p0] = s.tokens[p];
        HiddenAt(s, p - 1, hin.data() + static_cast<int64_t>(p - p0) * E_);
      }
      if (!Run(s, p0, toks, hin, model::MtpOutputs::kKvOnly, nullptr)) return false;
      s.n_valid = p0 + n;
    }
    return true;
  }

  bool Run(Seq& s, int32_t pos0, std::span<const int32_t> tokens, std::span<const float> hin,
           model::MtpOutputs outputs, model::MtpOutput* out) {
    model::MtpOutput scratch;
    Status st = s.kv.Reserve(int64_t{pos0} + static_cast<int64_t>(tokens.size()));
    if (st.ok()) {
      model::MtpRows rows{s.kv.pages(), pos0, tokens, hin};
      st = head_->Forward(rows, s.kv.kv(), outputs, out != nullptr ? out : &scratch, pool_);
    }
    if (!st.ok()) {
      LOG_WARN("MTP drafter: %s", st.error().ToString().c_str());
      return false;
    }
    return true;
  }

  std::unique_ptr<model::MtpHead> head_;
  std::unique_ptr<kernels::ThreadPool> own_pool_;
  kernels::ThreadPool* pool_ = nullptr;
  const int32_t E_;
  std::map<int32_t, Seq> seqs_;
  bool warned_ = false;
};

}  // namespace

Expected<std::unique_ptr<Drafter>> MakeMtpDrafter(model::Model& target, int32_t n_threads, int32_t draft_vocab) {
  REWIND_ASSIGN_OR_RETURN(std::unique_ptr<model::MtpHead> head, model::MtpHead::Create(target));
  head->LimitVocabulary(draft_vocab);
  return std::unique_ptr<Drafter>(std::make_unique<MtpDrafter>(std::move(head), n_threads, target.pool()));
}

}  // namespace rw::engine
