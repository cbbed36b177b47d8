// Test helpers: drive MemoryManager plans to commit, asserting success and invariants after every mutation.
#pragma once

#include <gtest/gtest.h>

#include <vector>

#include "memory/memory_manager.h"

namespace rw::memory::testing {

inline MemoryConfig SmallConfig(int64_t budget = 100000, int32_t slots = 8) {
  MemoryConfig c;
  c.page_tokens = 4;
  c.page_bytes = 10;
  c.state_bytes = 100;
  c.budget_bytes = budget;
  c.max_slots = slots;
  c.half_life = 1000;
  return c;
}

inline SeqId Acquire(MemoryManager& m, const std::vector<int32_t>& prompt, CacheHit* hit = nullptr) {
  auto p = m.PlanAcquire(prompt);
  EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error().message);
  if (hit != nullptr) *hit = p->hit;
  SeqId s = m.Commit(*p);
  m.CheckInvariants();
  return s;
}

inline void Append(MemoryManager& m, SeqId s, const std::vector<int32_t>& toks) {
  auto p = m.PlanAppend(s, toks);
  ASSERT_TRUE(p.ok()) << (p.ok() ? "" : p.error().message);
  m.Commit(*p);
  m.CheckInvariants();
}

inline CheckpointId TakeCheckpoint(MemoryManager& m, SeqId s) {
  auto p = m.PlanCheckpoint(s);
  EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error().message);
  m.Commit(*p);
  m.CheckInvariants();
  return p->id;
}

inline void Release(MemoryManager& m, SeqId s, bool insert = true) {
  auto p = m.PlanRelease(s, insert);
  ASSERT_TRUE(p.ok());
  m.Commit(*p);
  m.CheckInvariants();
}

// Acquires `toks` from scratch (or the cache), evaluates the rest with checkpoints at `ckpt_pos`, releases.
inline void RunAndInsert(MemoryManager& m, const std::vector<int32_t>& toks, const std::vector<int32_t>& ckpt_pos) {
  SeqId s = Acquire(m, toks);
  int32_t at = m.sequence(s).pos();
  std::vector<int32_t> ends = ckpt_pos;
  ends.push_back(static_cast<int32_t>(toks.size()));
  for (int32_t e : ends) {
    if (e <= at) continue;
    Append(m, s, std::vector<int32_t>(toks.begin() + at, toks.begin() + e));
    at = e;
    if (e < static_cast<int32_t>(toks.size()) || std::count(ckpt_pos.begin(), ckpt_pos.end(), e)) TakeCheckpoint(m, s);
  }
  Release(m, s, true);
}

}  // namespace rw::memory::testing
