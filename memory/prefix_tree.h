// The prefix tree: a radix tree over token ids shared by all sequences. A node covers the token span
// [start, end) of one path; it holds the ids of the pages overlapping that span (indices [start/P, ceil(end/P)),
// so a page straddling a node boundary is held by both nodes) and optionally a checkpoint at `end`. Ids only,
// no tensors (STYLE.md 3). Nodes in use are pinned by move-only leases.
//
// Invariant per node: its page for index i holds valid K/V, along the node's path, for positions
// [i*P, min((i+1)*P, end)).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "memory/checkpoint_table.h"
#include "memory/ids.h"
#include "memory/page_pool.h"
#include "memory/resume.h"

namespace rw::memory {

class PrefixTree;

// Pins one node (and so its path) against eviction. Move-only; releases in its destructor.
class Lease {
 public:
  Lease() = default;
  Lease(Lease&& o) noexcept : tree_(std::exchange(o.tree_, nullptr)), node_(std::exchange(o.node_, kNone)) {}
  Lease& operator=(Lease&& o) noexcept;
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  ~Lease() { Release(); }
  void Release();
  bool held() const { return tree_ != nullptr; }
  NodeId node() const { return node_; }

 private:
  friend class PrefixTree;
  Lease(PrefixTree* tree, NodeId node) : tree_(tree), node_(node) {}
  PrefixTree* tree_ = nullptr;
  NodeId node_ = kNone;
};

// The hybrid hit rule's answer for one prompt (I4).
struct TreeHit {
  int32_t lcp = 0;             // longest common prefix with the tree
  int32_t resume_pos = 0;      // deepest checkpoint on the matched path at or before lcp, < prompt size
  NodeId node = kNone;         // node ending at resume_pos holding that checkpoint (kNone when resume_pos == 0)
  CheckpointId ckpt = kNone;
  std::string reason;
};

// One entry eviction may remove, with the inputs of the scoring function (eviction.h).
struct EvictionCandidate {
  enum class Kind { kLeaf, kCheckpoint } kind = Kind::kLeaf;
  NodeId node = kNone;
  CheckpointId ckpt = kNone;   // kCheckpoint
  int64_t saved_tokens = 0;    // prefill work the entry saves beyond the next older exact state
  int64_t bytes = 0;           // bytes its removal frees (pages at their full size, wherever they live: the cost
                               // the eviction score weighs; MemoryManager counts what it frees of the budget)
  int32_t pages = 0;           // pages its removal frees
  uint64_t last_use = 0;
  bool leaf = false;           // no children: removing the checkpoint removes the node too
};

// What a plan removes from the tree, applied in order (simulated by planning, applied by commit).
struct TreeRemoval {
  bool whole_node = false;     // remove a leaf node (pages, checkpoint) vs drop only the node's checkpoint
  NodeId node = kNone;
};

class PrefixTree {
 public:
  PrefixTree(int32_t page_tokens, int64_t page_bytes, PagePool* pages, CheckpointTable* ckpts);
  PrefixTree(const PrefixTree&) = delete;
  PrefixTree& operator=(const PrefixTree&) = delete;
  ~PrefixTree();

  struct Node {
    NodeId parent = kNone;
    int32_t start = 0;
    std::vector<int32_t> tokens;         // span [start, start + tokens.size())
    std::map<int32_t, NodeId> children;  // first token -> child
    std::vector<PageId> pages;           // page indices [start/P, ceil(end/P))
    CheckpointId ckpt = kNone;           // state at end()
    int32_t pins = 0;                    // leases directly on this node
    uint64_t last_use = 0;
    bool alive = false;
    int32_t end() const { return start + static_cast<int32_t>(tokens.size()); }
  };

  NodeId root() const { return 0; }
  const Node& node(NodeId id) const;
  int32_t node_count() const;  // alive nodes including the root
  NodeId node_id_end() const { return static_cast<NodeId>(nodes_.size()); }  // ids are < this
  bool alive(NodeId id) const { return id >= 0 && id < node_id_end() && nodes_[id].alive; }

  // Longest common prefix of `tokens` with the tree, and the path of nodes it touches (root excluded).
  struct Match {
    int32_t lcp = 0;
    std::vector<NodeId> path;  // last one may be matched only partly
  };
  Match MatchPrefix(std::span<const int32_t> tokens) const;

  // The hybrid hit rule through the coordinator (resume.h): limit = prompt.size() - 1.
  TreeHit FindResume(std::span<const int32_t> prompt) const;
  // Exact states on the path of `tokens` at positions <= limit: (pos, ckpt), ascending, hash-checked (I2).
  std::vector<std::pair<int32_t, CheckpointId>> CheckpointsOnPath(std::span<const int32_t> tokens,
                                                                  int32_t limit) const;
  // Page table of [0, len) along the path of `tokens` (len <= lcp): ceil(len/P) ids. No refs taken.
  std::vector<PageId> PathPages(std::span<const int32_t> tokens, int32_t len) const;
  // Positions where a request following `tokens` would cross a known branch point: ends of matched nodes with
  // two or more children, and the divergence point (lcp) itself when 0 < lcp < tokens.size().
  std::vector<int32_t> BranchPoints(std::span<const int32_t> tokens) const;

  // Inserts a path: tokens [0, L), its page table (ceil(L/P) ids) and checkpoints (pos, id) with pos <= L that
  // serve `tokens`. Takes its own references; existing nodes and checkpoints are kept. Returns the node ending
  // at L (or the root when L == 0).
  NodeId Insert(std::span<const int32_t> tokens, std::span<const PageId> pages,
                std::span<const std::pair<int32_t, CheckpointId>> ckpts, uint64_t now);
  // Tokens [0, node.end()) of the path from the root to `node`.
  std::vector<int32_t> PathTokens(NodeId id) const;
  // Updates last_use of every node on the path up to `node`.
  void Touch(NodeId node, uint64_t now);

  Lease Pin(NodeId node);

  // Eviction: candidates given removals planned so far (pure), and applying one removal.
  std::vector<EvictionCandidate> Candidates(std::span<const TreeRemoval> planned) const;
  // Applies a removal; returns the checkpoint whose last reference went away (kNone otherwise).
  CheckpointId Apply(const TreeRemoval& removal);

  // Adds every page/checkpoint reference the tree holds to the counts; aborts on a broken structure.
  void CheckInvariants(std::vector<int32_t>* page_holders, std::map<CheckpointId, int32_t>* ckpt_holders) const;
  int32_t lease_count() const { return leases_; }
  std::string DebugString() const;

 private:
  friend class Lease;
  void Unpin(NodeId node);
  NodeId NewNode();
  NodeId SplitAt(NodeId id, int32_t pos);  // returns the new upper node ending at pos
  int32_t FirstPage(int32_t pos) const { return pos / page_tokens_; }
  int32_t EndPage(int32_t pos) const { return (pos + page_tokens_ - 1) / page_tokens_; }

  int32_t page_tokens_;
  int64_t page_bytes_;
  PagePool* pages_;
  CheckpointTable* ckpts_;
  std::vector<Node> nodes_;  // [node id]; dead nodes are reused
  std::vector<NodeId> free_nodes_;
  int32_t leases_ = 0;
};

}  // namespace rw::memory
