#include "memory/prefix_tree.h"

#include <gtest/gtest.h>

#include "base/hash.h"

namespace rw::memory {
namespace {

constexpr int32_t kP = 4;

class PrefixTreeTest : public ::testing::Test {
 protected:
  PrefixTreeTest() : pool_(64), tree_(kP, 10, &pool_, &ckpts_) {}

  // Inserts a finished path the way a sequence release does: fresh pages and checkpoints held by the
  // "sequence" for the duration of the insert, then let go. Returns the page table it used.
  std::vector<PageId> InsertPath(const std::vector<int32_t>& toks, const std::vector<int32_t>& ckpt_pos = {}) {
    std::vector<PageId> pages;
    for (int32_t i = 0; i < (static_cast<int32_t>(toks.size()) + kP - 1) / kP; ++i) pages.push_back(pool_.Alloc());
    std::vector<std::pair<int32_t, CheckpointId>> ck;
    for (int32_t p : ckpt_pos) {
      CheckpointId id = ckpts_.next_id();
      ckpts_.Add(id, p, HashTokens(std::span<const int32_t>(toks).first(static_cast<size_t>(p))), 100, 0);
      ck.emplace_back(p, id);
    }
    tree_.Insert(toks, pages, ck, ++now_);
    for (PageId p : pages) pool_.Unref(p);
    for (auto [p, id] : ck) ckpts_.Unref(id);
    Check();
    return pages;
  }

  void Check() {
    std::vector<int32_t> holders(static_cast<size_t>(pool_.capacity()), 0);
    std::map<CheckpointId, int32_t> ck;
    tree_.CheckInvariants(&holders, &ck);
    pool_.CheckCounts(holders);
    ckpts_.CheckCounts(ck);
  }

  PagePool pool_;
  CheckpointTable ckpts_;
  PrefixTree tree_;
  uint64_t now_ = 0;
};

TEST_F(PrefixTreeTest, MatchFindsTheLongestCommonPrefix) {
  InsertPath({1, 2, 3, 4, 5, 6});
  EXPECT_EQ(tree_.MatchPrefix(std::vector<int32_t>{1, 2, 3, 9}).lcp, 3);
  EXPECT_EQ(tree_.MatchPrefix(std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7}).lcp, 6);
  EXPECT_EQ(tree_.MatchPrefix(std::vector<int32_t>{7}).lcp, 0);
  EXPECT_EQ(tree_.node_count(), 2);
}

TEST_F(PrefixTreeTest, SplitSharesTheStraddlingPageAndKeepsEachBranchsOwnPages) {
  std::vector<int32_t> a = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  std::vector<int32_t> b = {1, 2, 3, 4, 5, 6, 70, 71};
  auto pa = InsertPath(a);  // pages a0 a1 a2
  auto pb = InsertPath(b);  // diverges at 6, inside page 1
  EXPECT_EQ(tree_.node_count(), 4);  // root, [0,6), [6,9), [6,8)
  EXPECT_EQ(pool_.RefCount(pa[0]), 1);
  EXPECT_EQ(pool_.RefCount(pa[1]), 2);  // held by [0,6) and [6,9)
  EXPECT_EQ(pool_.RefCount(pa[2]), 1);
  EXPECT_EQ(pool_.RefCount(pb[0]), 0);  // b's copy of the shared page 0 is not needed
  EXPECT_EQ(pool_.RefCount(pb[1]), 1);
  EXPECT_EQ(tree_.PathPages(a, 9), (std::vector<PageId>{pa[0], pa[1], pa[2]}));
  EXPECT_EQ(tree_.PathPages(b, 8), (std::vector<PageId>{pa[0], pb[1]}));
  EXPECT_EQ(tree_.PathPages(b, 5), (std::vector<PageId>{pa[0], pa[1]}));
  EXPECT_EQ(tree_.PathPages(b, 4), (std::vector<PageId>{pa[0]}));
}

TEST_F(PrefixTreeTest, HitRuleResumesAtTheDeepestCheckpointAtOrBeforeTheLcp) {
  std::vector<int32_t> a = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  InsertPath(a, {4, 9});
  TreeHit hit = tree_.FindResume(std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7, 50});
  EXPECT_EQ(hit.lcp, 7);
  EXPECT_EQ(hit.resume_pos, 4);
  EXPECT_EQ(hit.reason, "nearest checkpoint at 4, LCP at 7");
  EXPECT_EQ(tree_.node(hit.node).end(), 4);
  EXPECT_EQ(ckpts_.Get(hit.ckpt).pos, 4);
  // The whole path plus more: the checkpoint at the end serves.
  hit = tree_.FindResume(std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
  EXPECT_EQ(hit.resume_pos, 9);
  EXPECT_EQ(hit.reason, "nearest checkpoint at 9, LCP at 9");
}

TEST_F(PrefixTreeTest, HitRuleLeavesOneTokenToEvaluate) {
  std::vector<int32_t> a = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  InsertPath(a, {4, 9});
  TreeHit hit = tree_.FindResume(a);
  EXPECT_EQ(hit.lcp, 9);
  EXPECT_EQ(hit.resume_pos, 4);  // the checkpoint at 9 would leave nothing to evaluate
  EXPECT_EQ(hit.reason, "nearest checkpoint at 4, LCP at 9 (whole prompt cached; its last token is evaluated again)");
}

TEST_F(PrefixTreeTest, ReportsNoSharedPrefixApartFromNoExactState) {
  InsertPath({1, 2, 3, 4, 5, 6});
  TreeHit none = tree_.FindResume(std::vector<int32_t>{9, 9});
  EXPECT_EQ(none.lcp, 0);
  EXPECT_EQ(none.reason, "no shared prefix");
  TreeHit no_state = tree_.FindResume(std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7});
  EXPECT_EQ(no_state.lcp, 6);
  EXPECT_EQ(no_state.resume_pos, 0);
  EXPECT_EQ(no_state.node, kNone);
  EXPECT_EQ(no_state.reason, "shared prefix of 6 tokens but no exact state at or before it");
}

TEST_F(PrefixTreeTest, CheckpointInsideANodeSplitsIt) {
  InsertPath({1, 2, 3, 4, 5, 6});
  InsertPath({1, 2, 3, 4, 5, 6}, {3});
  EXPECT_EQ(tree_.node_count(), 3);
  auto list = tree_.CheckpointsOnPath(std::vector<int32_t>{1, 2, 3, 4, 5, 6}, 6);
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].first, 3);
  // A second insert of the same checkpoint position keeps the first one.
  InsertPath({1, 2, 3, 7}, {3});
  EXPECT_EQ(ckpts_.size(), 1);
}

TEST_F(PrefixTreeTest, BranchPointsAreNodeEndsWithSeveralChildrenAndTheDivergence) {
  InsertPath({1, 2, 3, 4, 5, 6});
  InsertPath({1, 2, 3, 9, 9});
  EXPECT_EQ(tree_.BranchPoints(std::vector<int32_t>{1, 2, 3, 4, 5, 7, 7}), (std::vector<int32_t>{3, 5}));
  EXPECT_EQ(tree_.BranchPoints(std::vector<int32_t>{8}), (std::vector<int32_t>{}));
}

TEST_F(PrefixTreeTest, LeasesPinTheirPathAgainstEvictionAndReleaseOnDestruction) {
  InsertPath({1, 2, 3, 4, 5, 6});
  InsertPath({1, 2, 3, 9, 9});
  NodeId leaf = tree_.MatchPrefix(std::vector<int32_t>{1, 2, 3, 9, 9}).path.back();
  {
    Lease l = tree_.Pin(leaf);
    Lease moved = std::move(l);
    EXPECT_FALSE(l.held());
    EXPECT_EQ(tree_.lease_count(), 1);
    auto cands = tree_.Candidates({});
    ASSERT_EQ(cands.size(), 1u);  // only the other leaf: [3,6)
    EXPECT_EQ(tree_.node(cands[0].node).start, 3);
    EXPECT_EQ(tree_.node(cands[0].node).tokens.front(), 4);
    Check();
  }
  EXPECT_EQ(tree_.lease_count(), 0);
  EXPECT_EQ(tree_.Candidates({}).size(), 2u);
}

TEST_F(PrefixTreeTest, RemovingEveryCandidateEmptiesTheTree) {
  InsertPath({1, 2, 3, 4, 5, 6}, {2, 6});
  InsertPath({1, 2, 3, 9, 9}, {5});
  for (int guard = 0; guard < 20 && tree_.node_count() > 1; ++guard) {
    auto c = tree_.Candidates({});
    ASSERT_FALSE(c.empty());
    tree_.Apply({c[0].leaf, c[0].node});
    Check();
  }
  EXPECT_EQ(tree_.node_count(), 1);
  EXPECT_EQ(pool_.free_count(), pool_.capacity());
  EXPECT_EQ(ckpts_.size(), 0);
}

TEST_F(PrefixTreeTest, CandidatesSimulatePlannedRemovals) {
  InsertPath({1, 2, 3, 4, 5, 6}, {2});
  // Leaf [2,6) has no checkpoint: worthless, offered first with its exclusive pages.
  auto c = tree_.Candidates({});
  ASSERT_EQ(c.size(), 2u);
  std::vector<TreeRemoval> planned = {{true, tree_.MatchPrefix(std::vector<int32_t>{1, 2, 3}).path.back()}};
  auto after = tree_.Candidates(planned);
  ASSERT_EQ(after.size(), 1u);
  EXPECT_EQ(after[0].kind, EvictionCandidate::Kind::kCheckpoint);
  EXPECT_TRUE(after[0].leaf);
  EXPECT_EQ(after[0].saved_tokens, 2);
  EXPECT_EQ(after[0].bytes, 100 + 10);  // checkpoint + page 0 (page 1 went with the planned leaf)
}

TEST_F(PrefixTreeTest, LeaseReleasedAfterItsNodeAbortsOnUnderflow) {
  InsertPath({1, 2});
  NodeId n = tree_.MatchPrefix(std::vector<int32_t>{1, 2}).path.back();
  Lease l = tree_.Pin(n);
  l.Release();
  l.Release();  // a released lease is empty: releasing again is a no-op
  EXPECT_EQ(tree_.lease_count(), 0);
}

}  // namespace
}  // namespace rw::memory
