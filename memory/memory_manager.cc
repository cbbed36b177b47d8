// Sequence mutations: append, checkpoint, truncate, fork. Requests (acquire/release/evict) live in
// memory_requests.cc, invariants in memory_invariants.cc.
#include "memory/memory_manager.h"

#include <algorithm>

#include "base/check.h"
#include "base/hash.h"
#include "memory/sequence_resume.h"

namespace rw::memory {

MemoryManager::MemoryManager(const MemoryConfig& config)
    : config_(config),
      pages_(config.MaxPages()),
      slots_(config.max_slots),
      tree_(config.page_tokens, config.page_bytes, &pages_, &ckpts_) {
  REWIND_CHECK_MSG(config.Validate().ok(), "invalid MemoryConfig: %s", config.Validate().error().message.c_str());
}

const Sequence& MemoryManager::sequence(SeqId id) const {
  auto it = seqs_.find(id);
  REWIND_CHECK_MSG(it != seqs_.end(), "unknown sequence %d", id);
  return it->second;
}

Sequence& MemoryManager::mut(SeqId id) {
  auto it = seqs_.find(id);
  REWIND_CHECK_MSG(it != seqs_.end(), "unknown sequence %d", id);
  return it->second;
}

std::vector<SeqId> MemoryManager::sequence_ids() const {
  std::vector<SeqId> out;
  for (const auto& [id, s] : seqs_) out.push_back(id);
  return out;
}

void MemoryManager::Tick(uint64_t plan_generation) {
  REWIND_CHECK_MSG(plan_generation == generation_, "stale plan (generation %llu, now %llu)",
                   static_cast<unsigned long long>(plan_generation), static_cast<unsigned long long>(generation_));
  ++generation_;
  ++now_;
}

int64_t MemoryManager::used_bytes() const {
  return static_cast<int64_t>(pages_.used_count()) * config_.PageCharge() + ckpts_.total_bytes();
}

Agreement MemoryManager::FindResume(SeqId seq, std::span<const int32_t> candidate, int32_t limit) const {
  return ResumeInSequence(sequence(seq), ckpts_, candidate, limit);
}

void MemoryManager::SetIdle(SeqId seq, bool idle) { mut(seq).idle = idle; }

static Error BudgetError(int64_t need, int64_t free) {
  return Error::Exhausted("memory budget: needs " + std::to_string(need) + " B, " + std::to_string(free) +
                          " B free (evict first)");
}

// ---- Reservations ------------------------------------------------------------------------------------------

int32_t MemoryManager::Headroom(const Sequence& s, int32_t pos) const {
  if (s.reserve <= 0) return 0;
  // A shared, partly filled last page will be copied by the next append (the shared one stays pinned).
  const bool cow = pos == s.pos() && pos % config_.page_tokens != 0 && pages_.RefCount(s.pages.back()) > 1;
  return std::max(0, PagesFor(s.reserve) - PagesFor(pos)) + (cow ? 1 : 0);
}

int32_t MemoryManager::MaxReserveTokens() const {
  int64_t pages = config_.MaxPages();
  if (!config_.pages_apart) pages = std::min(pages, config_.budget_bytes / config_.page_bytes);
  --pages;  // one page for copy-on-write
  return static_cast<int32_t>(std::clamp<int64_t>(pages * config_.page_tokens, 0, INT32_MAX));
}

bool MemoryManager::HasReservations() const {
  return std::any_of(seqs_.begin(), seqs_.end(), [](const auto& kv) { return kv.second.reserve > 0; });
}

MemoryManager::Room MemoryManager::RoomForAppends(std::span<const std::pair<SeqId, int32_t>> appends) const {
  int64_t pages = 0;
  for (const auto& [id, s] : seqs_) {
    int32_t n = 0;
    for (const auto& [seq, k] : appends)
      if (seq == id) n += k;
    if (n > 0) pages += AppendPages(id, n);
    pages += Headroom(s, s.pos() + n);
  }
  return {pages * config_.PageCharge(), static_cast<int32_t>(std::min<int64_t>(pages, INT32_MAX))};
}

// ---- Append ------------------------------------------------------------------------------------------------

int32_t MemoryManager::AppendPages(SeqId seq, int32_t n) const {
  const Sequence& s = sequence(seq);
  const bool cow = s.pos() % config_.page_tokens != 0 && pages_.RefCount(s.pages.back()) > 1;
  return PagesFor(s.pos() + n) - PagesFor(s.pos()) + (cow ? 1 : 0);
}

Expected<AppendPlan> MemoryManager::PlanAppend(SeqId seq, std::span<const int32_t> tokens) const {
  if (!has_sequence(seq)) return Error::NotFound("no sequence " + std::to_string(seq));
  if (tokens.empty()) return Error::InvalidArgument("append of zero tokens");
  const Sequence& s = sequence(seq);
  AppendPlan p;
  p.generation = generation_;
  p.seq = seq;
  p.pos0 = s.pos();
  p.tokens.assign(tokens.begin(), tokens.end());
  const int32_t new_len = p.pos0 + static_cast<int32_t>(tokens.size());
  int32_t n_new = PagesFor(new_len) - PagesFor(p.pos0);
  const bool cow = p.pos0 % config_.page_tokens != 0 && pages_.RefCount(s.pages.back()) > 1;
  int32_t n_take = n_new + (cow ? 1 : 0);
  p.bytes = static_cast<int64_t>(n_take) * config_.PageCharge();
  if (n_take > pages_.free_count())
    return Error::Exhausted("page pool: needs " + std::to_string(n_take) + " pages, " +
                            std::to_string(pages_.free_count()) + " free (evict first)");
  const std::pair<SeqId, int32_t> grow{seq, static_cast<int32_t>(tokens.size())};
  const Room room = RoomForAppends({&grow, 1});
  if (room.bytes > free_bytes()) return BudgetError(room.bytes, free_bytes());
  if (room.pages > pages_.free_count())  // the pages reservations hold back (implied by the bytes unless apart)
    return Error::Exhausted("page pool: needs " + std::to_string(room.pages) + " pages with the reservations, " +
                            std::to_string(pages_.free_count()) + " free (evict first)");
  p.take = pages_.PeekFree(n_take);
  if (cow) {
    p.cow_index = static_cast<int32_t>(s.pages.size()) - 1;
    p.ops.push_back(CopyPageOp{s.pages.back(), p.take[0]});
  }
  p.state_in = s.live;
  p.state_out = s.spare != kNone ? s.spare : s.live;
  return p;
}

void MemoryManager::Commit(const AppendPlan& p) {
  Tick(p.generation);
  Sequence& s = mut(p.seq);
  for (PageId id : p.take) pages_.Take(id);
  size_t k = 0;
  if (p.cow_index >= 0) {
    pages_.Unref(s.pages[static_cast<size_t>(p.cow_index)]);
    s.pages[static_cast<size_t>(p.cow_index)] = p.take[k++];
  }
  s.pages.insert(s.pages.end(), p.take.begin() + static_cast<std::ptrdiff_t>(k), p.take.end());
  s.tokens.insert(s.tokens.end(), p.tokens.begin(), p.tokens.end());
  if (s.spare != kNone) {
    std::swap(s.live, s.spare);  // state_out is live now; state_in keeps the batch-start state
    s.replay = {true, p.pos0, static_cast<int32_t>(p.tokens.size())};
  } else {
    s.replay = {};
  }
  s.last_use = now_;
}

// ---- Checkpoint --------------------------------------------------------------------------------------------

Expected<CheckpointPlan> MemoryManager::PlanCheckpoint(SeqId seq) const {
  if (!has_sequence(seq)) return Error::NotFound("no sequence " + std::to_string(seq));
  const Sequence& s = sequence(seq);
  CheckpointPlan p;
  p.generation = generation_;
  p.seq = seq;
  p.pos = s.pos();
  if (!s.checkpoints.empty() && ckpts_.Get(s.checkpoints.back()).pos == p.pos) {
    p.id = s.checkpoints.back();
    p.exists = true;
    return p;
  }
  if (CheckpointRoom() > free_bytes()) return BudgetError(CheckpointRoom(), free_bytes());
  p.id = ckpts_.next_id();
  p.ops.push_back(SaveCheckpointOp{s.live, p.id});
  return p;
}

void MemoryManager::Commit(const CheckpointPlan& p) {
  Tick(p.generation);
  if (p.exists) return;
  Sequence& s = mut(p.seq);
  REWIND_CHECK(s.pos() == p.pos);
  const std::span<const int32_t> rest = std::span<const int32_t>(s.tokens).subspan(static_cast<size_t>(s.hashed));
  s.hash = s.hashed == 0 ? HashTokens(rest) : HashTokens(rest, s.hash);
  s.hashed = s.pos();
  ckpts_.Add(p.id, p.pos, s.hash, config_.state_bytes, now_);
  s.checkpoints.push_back(p.id);
}

// ---- Truncate ----------------------------------------------------------------------------------------------

TruncatePlan MemoryManager::MakeTruncate(const Sequence& s, int32_t n) const {
  TruncatePlan p;
  p.generation = generation_;
  p.seq = s.id;
  p.target = n;
  Agreement a = ResumeInSequence(s, ckpts_, std::span<const int32_t>(s.tokens).first(static_cast<size_t>(n)), n);
  p.state = a.state;
  const int32_t r = a.state.pos;
  p.refeed.assign(s.tokens.begin() + r, s.tokens.begin() + n);
  p.keep_pages = PagesFor(r);
  switch (a.state.source) {
    case StateSource::kLive:
      p.replay_after = s.replay;
      break;
    case StateSource::kReplay:
      p.ops.push_back(ReplayStateOp{s.spare, s.spare, r - s.replay.start});
      p.swap_slots = true;
      p.replay_after = {};
      break;
    case StateSource::kCheckpoint:
      p.ops.push_back(RestoreCheckpointOp{a.state.ckpt, s.live});
      break;
    case StateSource::kZero:
      p.ops.push_back(ZeroStateOp{s.live});
      break;
  }
  for (CheckpointId id : s.checkpoints) {
    const Checkpoint& c = ckpts_.Get(id);
    if (c.pos <= r) continue;
    p.drop_ckpts.push_back(id);
    if (c.refs == 1) p.ops.push_back(FreeCheckpointOp{id});
  }
  return p;
}

Expected<TruncatePlan> MemoryManager::PlanTruncate(SeqId seq, int32_t n) const {
  if (!has_sequence(seq)) return Error::NotFound("no sequence " + std::to_string(seq));
  const Sequence& s = sequence(seq);
  if (n < 0 || n > s.pos())
    return Error::OutOfRange("truncate to " + std::to_string(n) + " of a sequence of " + std::to_string(s.pos()));
  return MakeTruncate(s, n);
}

void MemoryManager::ApplyTruncate(Sequence& s, const TruncatePlan& p) {
  const int32_t r = p.state.pos;
  REWIND_CHECK(r <= s.pos());
  for (size_t i = static_cast<size_t>(p.keep_pages); i < s.pages.size(); ++i) pages_.Unref(s.pages[i]);
  s.pages.resize(static_cast<size_t>(p.keep_pages));
  s.tokens.resize(static_cast<size_t>(r));
  if (s.hashed > r) s.hashed = 0;  // the running hash covers dropped tokens: start again when next needed
  for (CheckpointId id : p.drop_ckpts) {
    bool freed = ckpts_.Unref(id);
    bool planned = std::any_of(p.ops.begin(), p.ops.end(), [&](const DataOp& op) {
      return std::holds_alternative<FreeCheckpointOp>(op) && std::get<FreeCheckpointOp>(op).ckpt == id;
    });
    REWIND_CHECK_MSG(freed == planned, "checkpoint %d: plan and commit disagree on freeing it", id);
    s.checkpoints.erase(std::find(s.checkpoints.begin(), s.checkpoints.end(), id));
  }
  s.replay = p.replay_after;
  if (p.swap_slots) std::swap(s.live, s.spare);
  s.last_use = now_;
}

void MemoryManager::Commit(const TruncatePlan& p) {
  Tick(p.generation);
  ApplyTruncate(mut(p.seq), p);
}

// ---- Fork --------------------------------------------------------------------------------------------------

Expected<std::pair<SlotId, SlotId>> MemoryManager::PickSlots() const {
  if (slots_.free_count() == 0) return Error::Exhausted("no free recurrent-state slot");
  std::vector<SlotId> ids = slots_.PeekFree(std::min(2, slots_.free_count()));
  return std::make_pair(ids[0], ids.size() > 1 ? ids[1] : kNone);
}

Expected<ForkPlan> MemoryManager::PlanFork(SeqId seq) const {
  if (!has_sequence(seq)) return Error::NotFound("no sequence " + std::to_string(seq));
  REWIND_ASSIGN_OR_RETURN(auto slots, PickSlots());
  ForkPlan p;
  p.generation = generation_;
  p.src = seq;
  p.seq = next_seq_;
  p.live = slots.first;
  p.spare = slots.second;
  p.ops.push_back(CopyStateOp{sequence(seq).live, p.live});
  return p;
}

SeqId MemoryManager::Commit(const ForkPlan& p) {
  Tick(p.generation);
  const Sequence& src = sequence(p.src);
  REWIND_CHECK(p.seq == next_seq_);
  Sequence s;
  s.id = next_seq_++;
  s.tokens = src.tokens;
  s.pages = src.pages;
  s.checkpoints = src.checkpoints;
  for (PageId id : s.pages) pages_.Ref(id);
  for (CheckpointId id : s.checkpoints) ckpts_.Ref(id);
  s.live = p.live;
  s.spare = p.spare;
  slots_.Take(s.live);
  if (s.spare != kNone) slots_.Take(s.spare);
  s.last_use = now_;
  seqs_.emplace(s.id, std::move(s));
  return p.seq;
}

}  // namespace rw::memory
