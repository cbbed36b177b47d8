// A sequence grown to the Qwen3.5 trained context (262,144 tokens) in prefill chunks, with a checkpoint every
// 4,096 tokens as placement puts them inside long messages: the bookkeeping work per appended chunk must not grow
// with the position (no copies of the page table or the token list per chunk, no re-hash of the whole prefix per
// checkpoint). Work is counted, not timed: heap bytes and allocations made by the plans and commits of a chunk
// (this binary counts every operator new), and, for the hashes, the checkpoint hashes checked against a hash of
// the prefix computed here.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <vector>

#include "base/hash.h"
#include "memory/memory_manager.h"

namespace {
std::atomic<int64_t> g_alloc_bytes{0}, g_allocs{0};
}  // namespace

void* operator new(size_t n) {
  g_alloc_bytes.fetch_add(static_cast<int64_t>(n), std::memory_order_relaxed);
  g_allocs.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }

namespace rw::memory {
namespace {

struct Work {
  int64_t bytes = 0, allocs = 0;
};

Work Now() { return {g_alloc_bytes.load(), g_allocs.load()}; }

TEST(LongSequence, AppendingChunksUpTo256KTokensCostsTheSameBookkeepingAtEveryDepth) {
  constexpr int32_t kLen = 262144, kChunk = 512, kEvery = 4096, kWindow = 64;  // 512 chunks, windows of 64
  MemoryConfig c;
  c.page_tokens = 32;
  c.page_bytes = 1;
  c.state_bytes = 1;
  c.budget_bytes = kLen / c.page_tokens + 1024;
  c.max_slots = 4;
  MemoryManager m(c);
  auto acq = m.PlanAcquire(std::vector<int32_t>{7});
  ASSERT_TRUE(acq.ok());
  const SeqId s = m.Commit(*acq);

  std::vector<int32_t> chunk(kChunk);
  uint32_t x = 12345;
  uint64_t prefix_hash = 0;
  int32_t hashed = 0;
  std::vector<Work> per_chunk;
  for (int32_t pos = 0; pos < kLen; pos += kChunk) {
    for (int32_t& t : chunk) t = static_cast<int32_t>((x = x * 1664525u + 1013904223u) >> 16);
    const Work before = Now();
    auto plan = m.PlanAppend(s, chunk);
    ASSERT_TRUE(plan.ok()) << plan.error().message;
    m.Commit(*plan);
    if ((pos + kChunk) % kEvery == 0) {
      auto cp = m.PlanCheckpoint(s);
      ASSERT_TRUE(cp.ok()) << cp.error().message;
      m.Commit(*cp);
    }
    const Work after = Now();
    per_chunk.push_back({after.bytes - before.bytes, after.allocs - before.allocs});
    // Outside the counted region: the checkpoint serves exactly this prefix (its hash is the prefix's).
    if ((pos + kChunk) % kEvery == 0) {
      const std::vector<int32_t>& toks = m.sequence(s).tokens;
      const std::span<const int32_t> rest = std::span<const int32_t>(toks).subspan(static_cast<size_t>(hashed));
      prefix_hash = hashed == 0 ? HashTokens(rest) : HashTokens(rest, prefix_hash);
      hashed = static_cast<int32_t>(toks.size());
      EXPECT_EQ(m.checkpoints().Get(m.sequence(s).checkpoints.back()).prefix_hash, prefix_hash) << pos;
    }
  }
  ASSERT_EQ(m.sequence(s).pos(), kLen);
  ASSERT_EQ(static_cast<int32_t>(m.sequence(s).pages.size()), kLen / c.page_tokens);
  m.CheckInvariants();

  // The last window of chunks (positions 229K-256K) against the first (0-32K): the same counts up to the
  // amortised growth of the token list and page table (which falls in the first window). A copy of the page
  // table per chunk would add 8K ids x 4 B = 32 KiB per chunk at the end, several times the first window's total.
  Work first, last;
  for (int32_t i = 0; i < kWindow; ++i) {
    first.bytes += per_chunk[i].bytes;
    first.allocs += per_chunk[i].allocs;
    last.bytes += per_chunk[per_chunk.size() - kWindow + i].bytes;
    last.allocs += per_chunk[per_chunk.size() - kWindow + i].allocs;
  }
  EXPECT_LE(last.bytes, first.bytes + 4096) << "first window " << first.bytes << " B, last " << last.bytes << " B";
  EXPECT_LE(last.allocs, first.allocs + 16) << "first window " << first.allocs << ", last " << last.allocs;

  // A truncate below the hashed prefix, other tokens, a checkpoint: the running hash starts again, still exact.
  auto tr = m.PlanTruncate(s, kEvery * 3);
  ASSERT_TRUE(tr.ok());
  m.Commit(*tr);
  ASSERT_LE(m.sequence(s).pos(), kEvery * 3);
  auto app = m.PlanAppend(s, std::vector<int32_t>(100, 3));
  ASSERT_TRUE(app.ok());
  m.Commit(*app);
  auto cp = m.PlanCheckpoint(s);
  ASSERT_TRUE(cp.ok());
  m.Commit(*cp);
  EXPECT_EQ(m.checkpoints().Get(cp->id).prefix_hash,
            HashTokens(std::span<const int32_t>(m.sequence(s).tokens)));
  m.CheckInvariants();
}

}  // namespace
}  // namespace rw::memory
