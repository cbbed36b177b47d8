// Request-level mutations: acquire a sequence for a prompt, release it into the tree, evict.
#include <algorithm>
#include <set>

#include "base/check.h"
#include "memory/eviction.h"
#include "memory/memory_manager.h"
#include "memory/sequence_resume.h"

namespace rw::memory {

// ---- Acquire -----------------------------------------------------------------------------------------------

Expected<AcquirePlan> MemoryManager::PlanAcquire(std::span<const int32_t> prompt, bool use_cache,
                                                 int32_t reserve_tokens) const {
  if (prompt.empty()) return Error::InvalidArgument("empty prompt");
  if (reserve_tokens < 0) return Error::InvalidArgument("negative reservation");
  if (reserve_tokens > MaxReserveTokens())
    return Error::OutOfRange(
        "memory budget: a sequence of " + std::to_string(reserve_tokens) + " tokens needs " +
        std::to_string(ReservePages(reserve_tokens)) + " pages (" +
        std::to_string(int64_t{ReservePages(reserve_tokens)} * config_.page_bytes) + " B), more than " +
        (config_.pages_apart ? "the whole page pool of " + std::to_string(config_.MaxPages()) + " pages"
                             : "the whole budget of " + std::to_string(config_.budget_bytes) + " B") +
        " (at most " + std::to_string(MaxReserveTokens()) + " tokens fit)");
  REWIND_ASSIGN_OR_RETURN(AcquirePlan p, PlanAcquireAt(prompt, use_cache));
  p.reserve = reserve_tokens;
  if (reserve_tokens == 0) return p;
  // Admission: the new reservation (its whole page table, counted as new even where it shares the tree's
  // pages, plus the checkpoints its lease pins) must fit beside every other one once the cache is evicted.
  const Room held = RoomForAppends({});  // what the running reservations hold back
  const int64_t need = ReserveBytes(reserve_tokens) + held.bytes +
                       (p.adopt ? 0 : static_cast<int64_t>(p.ckpts.size()) * config_.state_bytes);
  const int32_t need_pages = ReservePages(reserve_tokens) + held.pages;  // implied by `need` unless apart
  if ((need > free_bytes() || need_pages > pages_.free_count()) &&
      !PlanEvictImpl(std::max<int64_t>(0, need - free_bytes()), std::max(0, need_pages - pages_.free_count()), false)
           .ok())
    return Error::Exhausted("memory budget: the request needs " + std::to_string(need) + " B beside the running "
                            "requests' reservations; it waits until they finish");
  return p;
}

Expected<AcquirePlan> MemoryManager::PlanAcquireAt(std::span<const int32_t> prompt, bool use_cache) const {
  const int32_t size = static_cast<int32_t>(prompt.size());
  AcquirePlan p;
  p.generation = generation_;

  TreeHit tree_hit;
  SeqId idle = kNone;
  Agreement idle_best;
  if (use_cache) {
    tree_hit = tree_.FindResume(prompt);
    for (const auto& [id, s] : seqs_) {
      if (!s.idle) continue;
      Agreement a = ResumeInSequence(s, ckpts_, prompt, size - 1);
      if (idle == kNone || a.state.pos > idle_best.state.pos ||
          (a.state.pos == idle_best.state.pos && a.attention_len > idle_best.attention_len)) {
        idle = id;
        idle_best = a;
      }
    }
  }
  const int32_t lcp = std::max(tree_hit.lcp, idle_best.attention_len);
  if (idle != kNone && idle_best.state.pos > tree_hit.resume_pos) {
    p.adopt = true;
    p.seq = idle;
    p.truncate = MakeTruncate(sequence(idle), idle_best.state.pos);
    REWIND_CHECK(p.truncate->state.pos == idle_best.state.pos && p.truncate->refeed.empty());
    p.ops = p.truncate->ops;
    p.hit = {lcp, idle_best.state.pos, idle_best.state.source,
             ResumeReason(lcp, idle_best.state.pos, idle_best.state.source, size)};
    return p;
  }
  REWIND_ASSIGN_OR_RETURN(auto slots, PickSlots());
  p.seq = next_seq_;
  p.live = slots.first;
  p.spare = slots.second;
  const int32_t r = tree_hit.resume_pos;
  p.node = tree_hit.node;
  p.prefix.assign(prompt.begin(), prompt.begin() + r);
  p.pages = tree_.PathPages(prompt, r);
  for (const auto& [pos, id] : tree_.CheckpointsOnPath(prompt, r)) p.ckpts.push_back(id);
  if (r > 0) {
    p.ops.push_back(RestoreCheckpointOp{tree_hit.ckpt, p.live});
  } else {
    p.ops.push_back(ZeroStateOp{p.live});
  }
  const StateSource source = r > 0 ? StateSource::kCheckpoint : StateSource::kZero;
  p.hit = {lcp, r, source, use_cache ? ResumeReason(lcp, r, source, size) : "cache disabled for this request"};
  return p;
}

SeqId MemoryManager::Commit(const AcquirePlan& p) {
  Tick(p.generation);
  if (p.adopt) {
    Sequence& s = mut(p.seq);
    ApplyTruncate(s, *p.truncate);
    s.idle = false;
    s.reserve = p.reserve;
    return p.seq;
  }
  REWIND_CHECK(p.seq == next_seq_);
  Sequence s;
  s.id = next_seq_++;
  s.tokens = p.prefix;
  s.pages = p.pages;
  for (PageId id : s.pages) pages_.Ref(id);
  s.checkpoints = p.ckpts;
  for (CheckpointId id : s.checkpoints) ckpts_.Ref(id);
  s.live = p.live;
  s.spare = p.spare;
  s.reserve = p.reserve;
  slots_.Take(s.live);
  if (s.spare != kNone) slots_.Take(s.spare);
  if (p.node != kNone) {
    s.lease = tree_.Pin(p.node);
    tree_.Touch(p.node, now_);
  }
  s.last_use = now_;
  seqs_.emplace(s.id, std::move(s));
  return p.seq;
}

// ---- Release -----------------------------------------------------------------------------------------------

Expected<ReleasePlan> MemoryManager::PlanRelease(SeqId seq, bool insert) const {
  if (!has_sequence(seq)) return Error::NotFound("no sequence " + std::to_string(seq));
  const Sequence& s = sequence(seq);
  ReleasePlan p;
  p.generation = generation_;
  p.seq = seq;
  p.insert = insert;
  std::set<int32_t> tree_has;
  if (insert)
    for (const auto& [pos, id] : tree_.CheckpointsOnPath(s.tokens, s.pos())) tree_has.insert(pos);
  for (CheckpointId id : s.checkpoints) {
    const Checkpoint& c = ckpts_.Get(id);
    bool kept = c.refs > 1 || (insert && c.pos > 0 && tree_has.count(c.pos) == 0);
    if (!kept) p.ops.push_back(FreeCheckpointOp{id});
  }
  return p;
}

static std::set<CheckpointId> PlannedFrees(const std::vector<DataOp>& ops) {
  std::set<CheckpointId> out;
  for (const DataOp& op : ops)
    if (std::holds_alternative<FreeCheckpointOp>(op)) out.insert(std::get<FreeCheckpointOp>(op).ckpt);
  return out;
}

void MemoryManager::Commit(const ReleasePlan& p) {
  Tick(p.generation);
  Sequence& s = mut(p.seq);
  if (p.insert) {
    std::vector<std::pair<int32_t, CheckpointId>> list;
    for (CheckpointId id : s.checkpoints) list.emplace_back(ckpts_.Get(id).pos, id);
    tree_.Insert(s.tokens, s.pages, list, now_);
  }
  for (PageId id : s.pages) pages_.Unref(id);
  std::set<CheckpointId> freed;
  for (CheckpointId id : s.checkpoints)
    if (ckpts_.Unref(id)) freed.insert(id);
  REWIND_CHECK_MSG(freed == PlannedFrees(p.ops), "release of sequence %d: plan and commit disagree", p.seq);
  slots_.Release(s.live);
  if (s.spare != kNone) slots_.Release(s.spare);
  s.lease.Release();
  seqs_.erase(p.seq);
}

// ---- Evict -------------------------------------------------------------------------------------------------

Expected<EvictPlan> MemoryManager::PlanEvictImpl(int64_t bytes, int32_t pages, bool all) const {
  EvictPlan p;
  p.generation = generation_;
  while (all || p.bytes_freed < bytes || p.pages_freed < pages) {
    std::vector<EvictionCandidate> cands = tree_.Candidates(p.removals);
    if (cands.empty()) break;
    const EvictionCandidate& c = cands[PickVictim(cands, now_, config_.half_life)];
    p.removals.push_back({c.leaf, c.node});
    p.bytes_freed += c.bytes - int64_t{c.pages} * (config_.page_bytes - config_.PageCharge());  // budget bytes
    p.pages_freed += c.pages;
    if (c.ckpt != kNone) p.ops.push_back(FreeCheckpointOp{c.ckpt});
  }
  if (!all && (p.bytes_freed < bytes || p.pages_freed < pages))
    return Error::Exhausted("memory budget: cannot free " + std::to_string(bytes) + " B / " +
                            std::to_string(pages) + " pages, only " + std::to_string(p.bytes_freed) + " B / " +
                            std::to_string(p.pages_freed) + " pages evictable");
  return p;
}

Expected<EvictPlan> MemoryManager::PlanEvict(int64_t bytes) const { return PlanEvictImpl(bytes, 0, false); }
Expected<EvictPlan> MemoryManager::PlanEvictAll() const { return PlanEvictImpl(0, 0, true); }

Expected<EvictPlan> MemoryManager::PlanMakeRoom(int64_t bytes, int32_t pages) const {
  return PlanEvictImpl(std::max<int64_t>(0, bytes - free_bytes()), std::max(0, pages - pages_.free_count()), false);
}

void MemoryManager::Commit(const EvictPlan& p) {
  Tick(p.generation);
  const int64_t before = used_bytes();
  const int32_t free_pages = pages_.free_count();
  std::set<CheckpointId> freed;
  for (const TreeRemoval& r : p.removals) {
    CheckpointId id = tree_.Apply(r);
    if (id != kNone) freed.insert(id);
  }
  REWIND_CHECK_MSG(freed == PlannedFrees(p.ops), "eviction: plan and commit disagree on checkpoints");
  REWIND_CHECK_MSG(before - used_bytes() == p.bytes_freed, "eviction freed %lld B, planned %lld B",
                   static_cast<long long>(before - used_bytes()), static_cast<long long>(p.bytes_freed));
  REWIND_CHECK(pages_.free_count() - free_pages == p.pages_freed);
}

}  // namespace rw::memory
