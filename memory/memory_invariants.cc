// CheckInvariants: every count and size recomputed from scratch (STYLE.md 5); DebugString for tests.
#include <sstream>

#include "base/check.h"
#include "base/hash.h"
#include "memory/memory_manager.h"

namespace rw::memory {

void MemoryManager::CheckInvariants() const {
  std::vector<int32_t> page_holders(static_cast<size_t>(pages_.capacity()), 0);
  std::map<CheckpointId, int32_t> ckpt_holders;
  std::vector<SlotId> owned;
  tree_.CheckInvariants(&page_holders, &ckpt_holders);
  int32_t leases = 0;
  for (const auto& [id, s] : seqs_) {
    REWIND_CHECK(s.id == id && id < next_seq_);
    REWIND_CHECK_MSG(static_cast<int32_t>(s.pages.size()) == PagesFor(s.pos()),
                     "sequence %d: %zu pages for %d tokens", id, s.pages.size(), s.pos());
    for (PageId p : s.pages) {
      REWIND_CHECK(p >= 0 && p < pages_.capacity());
      ++page_holders[static_cast<size_t>(p)];
    }
    REWIND_CHECK(s.live != kNone && s.live != s.spare);
    owned.push_back(s.live);
    if (s.spare != kNone) owned.push_back(s.spare);
    if (s.replay.valid) {
      REWIND_CHECK_MSG(s.spare != kNone && s.replay.start >= 0 && s.replay.len >= 0 &&
                           s.replay.start + s.replay.len == s.pos(),
                       "sequence %d: replay window [%d, +%d) vs position %d", id, s.replay.start, s.replay.len,
                       s.pos());
    }
    std::vector<uint64_t> hashes = PrefixHashes(s.tokens);
    int32_t prev = -1;
    for (CheckpointId c : s.checkpoints) {
      ++ckpt_holders[c];
      const Checkpoint& k = ckpts_.Get(c);
      REWIND_CHECK_MSG(k.pos > prev && k.pos <= s.pos(), "sequence %d: checkpoint %d out of order", id, c);
      REWIND_CHECK_MSG(k.prefix_hash == hashes[static_cast<size_t>(k.pos)],
                       "sequence %d: checkpoint %d does not serve its tokens (I2)", id, c);
      prev = k.pos;
    }
    if (s.lease.held()) {
      ++leases;
      const auto& n = tree_.node(s.lease.node());
      REWIND_CHECK(n.pins > 0);
    }
  }
  REWIND_CHECK_MSG(leases <= tree_.lease_count(), "sequences hold %d leases, tree counts %d", leases,
                   tree_.lease_count());
  pages_.CheckCounts(page_holders);
  ckpts_.CheckCounts(ckpt_holders);
  slots_.CheckOwned(owned);
  REWIND_CHECK_MSG(used_bytes() <= config_.budget_bytes, "used %lld B over the budget %lld B",
                   static_cast<long long>(used_bytes()), static_cast<long long>(config_.budget_bytes));
}

std::string MemoryManager::DebugString() const {
  std::ostringstream o;
  o << "gen " << generation_ << " used " << used_bytes() << " pages_free " << pages_.free_count() << " slots_free "
    << slots_.free_count() << " ckpts " << ckpts_.size() << " nodes " << tree_.node_count() << " leases "
    << tree_.lease_count() << "\n";
  for (const auto& [id, s] : seqs_) {
    o << "seq " << id << " pos " << s.pos() << " hash " << HashTokens(s.tokens) << " live " << s.live << " spare "
      << s.spare << " replay " << s.replay.valid << ":" << s.replay.start << "+" << s.replay.len << " idle "
      << s.idle << " pages";
    for (PageId p : s.pages) o << " " << p << "/" << pages_.RefCount(p);
    o << " ckpts";
    for (CheckpointId c : s.checkpoints) o << " " << c << "@" << ckpts_.Get(c).pos << "/" << ckpts_.Get(c).refs;
    o << "\n";
  }
  o << tree_.DebugString();
  return o.str();
}

}  // namespace rw::memory
