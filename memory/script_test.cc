// Randomized model-free scripts: random operations on several sequences, executed against a fake storage that
// models what the data means (a KV entry at q = hash of tokens [0, q]; a state = (position, prefix hash); a
// replay log = the tokens of the last batch). Every forward checks that the state it starts from and every KV
// entry it reads are exact for its token prefix (I1/I2), so a bookkeeping bug that would hand the model a wrong
// state or stale attention entries fails here. CheckInvariants after every mutation; all pools full at the end.
#include <gtest/gtest.h>

#include <array>
#include <map>
#include <random>
#include <set>

#include "base/hash.h"
#include "memory/memory_manager.h"

namespace rw::memory {
namespace {

struct FakeState {
  int32_t pos = -1;
  uint64_t hash = 0;
  bool operator==(const FakeState&) const = default;
};

class FakeStorage {
 public:
  explicit FakeStorage(const MemoryConfig& c)
      : p_(c.page_tokens), pages_(static_cast<size_t>(c.MaxPages()), std::vector<uint64_t>(c.page_tokens, 0)),
        slots_(static_cast<size_t>(c.max_slots)) {}

  void Exec(const std::vector<DataOp>& ops) {
    for (const DataOp& op : ops) Exec(op);
  }

  void Exec(const DataOp& op) {
    ++op_counts_[op.index()];
    if (auto* o = std::get_if<CopyPageOp>(&op)) {
      pages_.at(o->to) = pages_.at(o->from);
    } else if (auto* o = std::get_if<ZeroStateOp>(&op)) {
      Set(o->slot, {0, kFnvOffset});
    } else if (auto* o = std::get_if<CopyStateOp>(&op)) {
      Set(o->to, slots_.at(o->from));
    } else if (auto* o = std::get_if<RestoreCheckpointOp>(&op)) {
      ASSERT_TRUE(ckpts_.count(o->ckpt)) << "restore of a missing checkpoint " << o->ckpt;
      Set(o->slot, ckpts_[o->ckpt]);
    } else if (auto* o = std::get_if<SaveCheckpointOp>(&op)) {
      ASSERT_FALSE(ckpts_.count(o->ckpt)) << "checkpoint id reused";
      ckpts_[o->ckpt] = slots_.at(o->slot);
    } else if (auto* o = std::get_if<ReplayStateOp>(&op)) {
      ASSERT_TRUE(logs_.count(o->from)) << "replay without a log for slot " << o->from;
      const auto& log = logs_[o->from];
      ASSERT_LE(o->count, static_cast<int32_t>(log.size()));
      FakeState s = slots_.at(o->from);
      s.hash = HashTokens(std::span<const int32_t>(log).first(static_cast<size_t>(o->count)), s.hash);
      s.pos += o->count;
      Set(o->to, s);
    } else if (auto* o = std::get_if<FreeCheckpointOp>(&op)) {
      ASSERT_EQ(ckpts_.erase(o->ckpt), 1u) << "free of a missing checkpoint";
    }
  }

  // The model's forward for one sequence (after Commit; `seq_tokens` are the sequence's tokens now).
  void Forward(const AppendPlan& p, const std::vector<int32_t>& seq_tokens, const std::vector<PageId>& table) {
    std::vector<uint64_t> h = PrefixHashes(seq_tokens);
    ASSERT_EQ(slots_.at(p.state_in), (FakeState{p.pos0, h[p.pos0]})) << "forward from an inexact state (I2)";
    for (int32_t q = 0; q < p.pos0; ++q)
      ASSERT_EQ(Entry(table, q), h[q + 1]) << "attention reads a stale entry at " << q;
    const int32_t end = p.pos0 + static_cast<int32_t>(p.tokens.size());
    for (int32_t q = p.pos0; q < end; ++q) pages_.at(table.at(q / p_)).at(q % p_) = h[q + 1];
    if (p.state_in != p.state_out) {
      logs_[p.state_in] = p.tokens;
      Set(p.state_out, {end, h[end]});
    } else {
      Set(p.state_out, {end, h[end]});
    }
  }

  void Verify(const MemoryManager& m) {
    for (SeqId id : m.sequence_ids()) {
      const Sequence& s = m.sequence(id);
      std::vector<uint64_t> h = PrefixHashes(s.tokens);
      ASSERT_EQ(slots_.at(s.live), (FakeState{s.pos(), h.back()})) << "sequence " << id << " live state";
      for (int32_t q = 0; q < s.pos(); ++q) ASSERT_EQ(Entry(s.pages, q), h[q + 1]) << "seq " << id << " kv " << q;
      if (s.replay.valid) {
        ASSERT_EQ(slots_.at(s.spare), (FakeState{s.replay.start, h[s.replay.start]}));
        ASSERT_TRUE(logs_.count(s.spare));
        const auto& log = logs_[s.spare];
        ASSERT_GE(static_cast<int32_t>(log.size()), s.replay.len);
        for (int32_t i = 0; i < s.replay.len; ++i) ASSERT_EQ(log[i], s.tokens[s.replay.start + i]);
      }
      for (CheckpointId c : s.checkpoints) {
        const Checkpoint& k = m.checkpoints().Get(c);
        ASSERT_EQ(ckpts_.at(c), (FakeState{k.pos, h[k.pos]}));
      }
    }
    const PrefixTree& t = m.tree();
    for (NodeId id = 1; id < t.node_id_end(); ++id) {
      if (!t.alive(id)) continue;
      const auto& n = t.node(id);
      std::vector<int32_t> path;
      std::vector<NodeId> chain;
      for (NodeId a = id; a != t.root(); a = t.node(a).parent) chain.push_back(a);
      for (auto it = chain.rbegin(); it != chain.rend(); ++it)
        path.insert(path.end(), t.node(*it).tokens.begin(), t.node(*it).tokens.end());
      std::vector<uint64_t> h = PrefixHashes(path);
      for (int32_t q = n.start; q < n.end(); ++q)
        ASSERT_EQ(pages_.at(n.pages.at(q / p_ - n.start / p_)).at(q % p_), h[q + 1]) << "node " << id << " kv " << q;
      // The straddling first page also serves the positions before the node's start.
      for (int32_t q = (n.start / p_) * p_; q < n.start; ++q) ASSERT_EQ(pages_.at(n.pages.at(0)).at(q % p_), h[q + 1]);
      if (n.ckpt != kNone) {
        ASSERT_EQ(ckpts_.at(n.ckpt), (FakeState{n.end(), h.back()}));
      }
    }
    ASSERT_EQ(static_cast<int32_t>(ckpts_.size()), m.checkpoints().size()) << "checkpoint buffers leaked";
  }

  size_t checkpoint_buffers() const { return ckpts_.size(); }
  const std::array<int64_t, std::variant_size_v<DataOp>>& op_counts() const { return op_counts_; }

 private:
  uint64_t Entry(const std::vector<PageId>& table, int32_t q) const {
    return pages_.at(table.at(q / p_)).at(q % p_);
  }
  void Set(SlotId slot, FakeState s) {
    slots_.at(slot) = s;
    logs_.erase(slot);  // the batch that started from this slot's old contents can no longer be replayed
  }

  int32_t p_;
  std::vector<std::vector<uint64_t>> pages_;  // [page][position in page] prefix hash of tokens [0, q]
  std::vector<FakeState> slots_;
  std::map<CheckpointId, FakeState> ckpts_;
  std::map<SlotId, std::vector<int32_t>> logs_;  // batch-start slot -> tokens of that batch
  std::array<int64_t, std::variant_size_v<DataOp>> op_counts_{};
};

class Script {
 public:
  // apart: the pages are a pool of their own and the budget holds checkpoints only (a GPU's cache).
  explicit Script(uint64_t seed, bool apart = false)
      : rng_(seed), cfg_(MakeConfig(rng_, apart)), m_(cfg_), st_(cfg_) {}

  static MemoryConfig MakeConfig(std::mt19937_64& rng, bool apart) {
    MemoryConfig c;
    c.page_tokens = 1 + static_cast<int32_t>(rng() % 5);
    c.page_bytes = 10;
    c.state_bytes = 30 + static_cast<int64_t>(rng() % 80);
    c.budget_bytes = 200 + static_cast<int64_t>(rng() % 1500);
    c.max_slots = 2 + static_cast<int32_t>(rng() % 7);
    c.half_life = 1 + static_cast<int64_t>(rng() % 50);
    if (apart) {
      c.pages_apart = true;
      c.max_pages = 8 + static_cast<int32_t>(rng() % 40);
      c.budget_bytes = c.state_bytes + static_cast<int64_t>(rng() % 600);  // from none to many checkpoints
    } else if (rng() % 2 == 0) {
      c.max_pages = 8 + static_cast<int32_t>(rng() % 40);  // pages scarcer than bytes
    }
    return c;
  }

  int32_t R(int32_t n) { return static_cast<int32_t>(rng_() % static_cast<uint64_t>(n)); }

  void Check() {
    m_.CheckInvariants();
    st_.Verify(m_);
    ++ops_;
  }

  bool MakeRoom(int64_t need, int32_t pages) {
    auto e = m_.PlanMakeRoom(need, pages);
    if (!e.ok()) return false;
    if (!e->removals.empty()) {
      m_.Commit(*e);
      st_.Exec(e->ops);
      Check();
    }
    EXPECT_GE(m_.free_bytes(), need);
    EXPECT_GE(m_.pages().free_count(), pages);
    return true;
  }

  bool Append(SeqId s, const std::vector<int32_t>& toks) {
    if (toks.empty()) return true;
    const std::string before = m_.DebugString();
    const int32_t n = static_cast<int32_t>(toks.size());
    const int32_t need = m_.AppendPages(s, n);
    const std::pair<SeqId, int32_t> grow{s, n};
    // Admission control's promise: inside its reservation a sequence always finds room (one copy-on-write
    // page is reserved), in bytes and in pages (a pool scarcer than the budget, or apart from it). Not kept
    // after a fork, an adopted sequence or a rollback into a leased prefix: they can share a last page again
    // after admission (the engine does none of them).
    const Sequence& q = m_.sequence(s);
    const bool cow = need > (q.pos() + n + cfg_.page_tokens - 1) / cfg_.page_tokens -
                                (q.pos() + cfg_.page_tokens - 1) / cfg_.page_tokens;
    const bool promised = q.reserve >= q.pos() + n &&
                          cows_[s] + (cow ? 1 : 0) <= 1 && unpromised_.empty();
    const MemoryManager::Room room = m_.RoomForAppends({&grow, 1});
    if (!MakeRoom(room.bytes, room.pages)) {
      EXPECT_FALSE(promised) << "an append inside its reservation found no room";
      auto p = m_.PlanAppend(s, toks);
      EXPECT_FALSE(p.ok());
      EXPECT_EQ(m_.DebugString(), before) << "a failed plan changed the bookkeeping";
      return false;
    }
    auto p = m_.PlanAppend(s, toks);
    EXPECT_TRUE(p.ok()) << p.error().message;
    if (!p.ok()) return false;
    if (promised) ++promised_appends;
    if (p->cow_index >= 0) ++cows_[s];
    m_.Commit(*p);
    st_.Exec(p->ops);
    st_.Forward(*p, m_.sequence(s).tokens, m_.sequence(s).pages);
    Check();
    return true;
  }

  void MaybeCheckpoint(SeqId s) {
    auto p = m_.PlanCheckpoint(s);
    if (!p.ok()) {
      EXPECT_EQ(p.error().kind, ErrorKind::kResourceExhausted);
      if (!MakeRoom(m_.CheckpointRoom(), 0)) return;
      p = m_.PlanCheckpoint(s);
      if (!p.ok()) return;
    }
    m_.Commit(*p);
    st_.Exec(p->ops);
    Check();
  }

  // Evaluates `toks` on s in random chunks, checkpointing at some chunk ends.
  void Feed(SeqId s, const std::vector<int32_t>& toks) {
    size_t at = 0;
    while (at < toks.size()) {
      size_t n = std::min(toks.size() - at, static_cast<size_t>(1 + R(6)));
      if (!Append(s, std::vector<int32_t>(toks.begin() + at, toks.begin() + at + n))) return;
      at += n;
      if (R(3) == 0) MaybeCheckpoint(s);
    }
  }

  std::vector<int32_t> RandomPrompt() {
    std::vector<int32_t> base;
    if (!known_.empty() && R(4) != 0) base = known_[R(static_cast<int32_t>(known_.size()))];
    base.resize(static_cast<size_t>(R(static_cast<int32_t>(base.size()) + 1)));
    int32_t extra = 1 + R(12);
    for (int32_t i = 0; i < extra; ++i) base.push_back(R(3));
    return base;
  }

  void NewRequest() {
    std::vector<int32_t> prompt = RandomPrompt();
    // A third of the requests reserve nothing; the others up to a random length past their prompt.
    const int32_t reserve = R(3) == 0 ? 0 : static_cast<int32_t>(prompt.size()) + R(40);
    auto p = m_.PlanAcquire(prompt, R(10) != 0, reserve);
    if (!p.ok()) {
      if (p.error().kind == ErrorKind::kOutOfRange) {
        ASSERT_GT(reserve, m_.MaxReserveTokens());
        if (cfg_.max_pages == 0) {
          ASSERT_GT(m_.ReserveBytes(reserve), cfg_.budget_bytes);
        }
      } else {
        ASSERT_EQ(p.error().kind, ErrorKind::kResourceExhausted);
      }
      return;
    }
    if (p->adopt) unpromised_.insert(p->seq);
    ASSERT_LT(p->hit.resume_pos, static_cast<int32_t>(prompt.size()));
    ASSERT_LE(p->hit.resume_pos, p->hit.lcp);
    SeqId s = m_.Commit(*p);
    st_.Exec(p->ops);
    Check();
    ASSERT_EQ(m_.sequence(s).pos(), p->hit.resume_pos);
    resumed_at_[s] = p->hit.resume_pos;
    known_.push_back(prompt);
    Feed(s, std::vector<int32_t>(prompt.begin() + m_.sequence(s).pos(), prompt.end()));
  }

  SeqId PickSeq(bool include_idle) {
    std::vector<SeqId> ids;
    for (SeqId id : m_.sequence_ids())
      if (include_idle || !m_.sequence(id).idle) ids.push_back(id);
    return ids.empty() ? kNone : ids[R(static_cast<int32_t>(ids.size()))];
  }

  void Step() {
    SeqId s = PickSeq(false);
    int32_t op = R(10);
    if (s == kNone || op == 0) return NewRequest();
    const Sequence& q = m_.sequence(s);
    switch (op) {
      case 1:
      case 2: {  // decode
        Append(s, {R(3)});
        if (R(4) == 0) MaybeCheckpoint(s);
        break;
      }
      case 3:
      case 4: {  // rollback by a random distance, then re-feed (and maybe diverge)
        int32_t n = q.pos() - R(std::min(q.pos(), 12) + 1);
        if (R(2) == 0) n = R(q.pos() + 1);
        auto p = m_.PlanTruncate(s, n);
        ASSERT_TRUE(p.ok());
        if (n < resumed_at_[s]) unpromised_.insert(s);  // back into the shared prefix: its page may be copied again
        m_.Commit(*p);
        st_.Exec(p->ops);
        Check();
        Feed(s, p->refeed);
        if (R(2) == 0) Feed(s, {R(3), R(3)});
        break;
      }
      case 5: {
        auto p = m_.PlanFork(s);
        if (!p.ok()) break;
        SeqId f = m_.Commit(*p);
        unpromised_.insert(s);  // its last page is shared now: another copy-on-write may come
        st_.Exec(p->ops);
        Check();
        Append(f, {R(3)});
        break;
      }
      case 6:
        MaybeCheckpoint(s);
        break;
      case 7: {
        if (R(3) == 0) {
          m_.SetIdle(s, true);
          Check();
          break;
        }
        Release(s, R(4) != 0);
        break;
      }
      case 8: {
        auto p = m_.PlanEvict(1 + R(300));
        if (p.ok()) {
          m_.Commit(*p);
          st_.Exec(p->ops);
          Check();
        }
        break;
      }
      default: {
        if (m_.sequence(s).pos() > 0 && R(2) == 0) known_.push_back(m_.sequence(s).tokens);
        Feed(s, {R(3), R(3), R(3)});
      }
    }
    // Idle sequences hold slots: release one now and then so new requests find room.
    if (R(6) == 0) {
      SeqId idle = kNone;
      for (SeqId id : m_.sequence_ids())
        if (m_.sequence(id).idle) idle = id;
      if (idle != kNone) Release(idle, true);
    }
  }

  void Release(SeqId s, bool insert) {
    if (insert) MaybeCheckpoint(s);
    auto p = m_.PlanRelease(s, insert);
    ASSERT_TRUE(p.ok());
    m_.Commit(*p);
    st_.Exec(p->ops);
    Check();
  }

  void Finish() {
    for (SeqId id : m_.sequence_ids()) Release(id, R(2) == 0);
    auto all = m_.PlanEvictAll();
    ASSERT_TRUE(all.ok());
    m_.Commit(*all);
    st_.Exec(all->ops);
    Check();
    EXPECT_EQ(m_.pages().free_count(), m_.pages().capacity());
    EXPECT_EQ(m_.slots().free_count(), m_.slots().capacity());
    EXPECT_EQ(m_.checkpoints().size(), 0);
    EXPECT_EQ(st_.checkpoint_buffers(), 0u);
    EXPECT_EQ(m_.tree().node_count(), 1);
    EXPECT_EQ(m_.tree().lease_count(), 0);
    EXPECT_EQ(m_.used_bytes(), 0);
  }

  int64_t ops() const { return ops_; }
  const FakeStorage& storage() const { return st_; }

 private:
  std::mt19937_64 rng_;
  MemoryConfig cfg_;
  MemoryManager m_;
  FakeStorage st_;
  std::vector<std::vector<int32_t>> known_;
  std::map<SeqId, int32_t> cows_;       // copy-on-write page copies per sequence
  std::map<SeqId, int32_t> resumed_at_; // position each sequence was acquired at (its leased prefix)
  std::set<SeqId> unpromised_;          // sequences whose reservation may not cover further copies
  int64_t ops_ = 0;
 public:
  int64_t promised_appends = 0;         // appends the reservation promise covered (and kept)
};

void RunScripts(bool apart) {
  int64_t total_ops = 0, promised = 0;
  std::array<int64_t, std::variant_size_v<DataOp>> by_kind{};
  const int kScripts = 300;
  for (int i = 0; i < kScripts; ++i) {
    const uint64_t seed = 1000 + static_cast<uint64_t>(i);
    Script s(seed, apart);
    for (int step = 0; step < 60 && !::testing::Test::HasFailure(); ++step) s.Step();
    if (!::testing::Test::HasFailure()) s.Finish();
    total_ops += s.ops();
    promised += s.promised_appends;
    for (size_t k = 0; k < by_kind.size(); ++k) by_kind[k] += s.storage().op_counts()[k];
    ASSERT_FALSE(::testing::Test::HasFailure()) << "failing script seed " << seed;
  }
  std::printf("memory scripts%s: %d scripts, %lld checked mutations, %lld appends inside a reservation\n", apart ? " (pages apart)" : "",
              kScripts, static_cast<long long>(total_ops), static_cast<long long>(promised));
  EXPECT_GT(promised, 1000) << "the reservation promise was hardly exercised";
  const char* names[] = {"copy_page", "zero_state", "copy_state", "restore", "save", "replay", "free_ckpt"};
  for (size_t k = 0; k < by_kind.size(); ++k) {
    std::printf("  %s: %lld\n", names[k], static_cast<long long>(by_kind[k]));
    EXPECT_GT(by_kind[k], 0) << names[k] << " never exercised";
  }
}

TEST(MemoryScript, RandomOperationsKeepEveryStateAndEntryExact) { RunScripts(false); }

// The pages in a pool of their own (a GPU's), the budget bounding checkpoints only: the same exactness, and the
// reservation promise kept in pages.
TEST(MemoryScript, RandomOperationsWithPagesApartKeepEveryStateAndEntryExact) { RunScripts(true); }

}  // namespace
}  // namespace rw::memory
