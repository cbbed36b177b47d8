#include "memory/prefix_tree.h"

#include <algorithm>

#include "base/check.h"
#include "base/hash.h"

namespace rw::memory {

Lease& Lease::operator=(Lease&& o) noexcept {
  if (this != &o) {
    Release();
    tree_ = std::exchange(o.tree_, nullptr);
    node_ = std::exchange(o.node_, kNone);
  }
  return *this;
}

void Lease::Release() {
  if (tree_ != nullptr) tree_->Unpin(node_);
  tree_ = nullptr;
  node_ = kNone;
}

PrefixTree::PrefixTree(int32_t page_tokens, int64_t page_bytes, PagePool* pages, CheckpointTable* ckpts)
    : page_tokens_(page_tokens), page_bytes_(page_bytes), pages_(pages), ckpts_(ckpts) {
  REWIND_CHECK(page_tokens_ > 0 && pages_ != nullptr && ckpts_ != nullptr);
  NodeId r = NewNode();
  REWIND_CHECK(r == 0);
}

PrefixTree::~PrefixTree() { REWIND_CHECK_MSG(leases_ == 0, "prefix tree destroyed with %d leases held", leases_); }

const PrefixTree::Node& PrefixTree::node(NodeId id) const {
  REWIND_CHECK_MSG(id >= 0 && id < static_cast<NodeId>(nodes_.size()) && nodes_[id].alive, "bad node %d", id);
  return nodes_[static_cast<size_t>(id)];
}

int32_t PrefixTree::node_count() const {
  return static_cast<int32_t>(nodes_.size() - free_nodes_.size());
}

NodeId PrefixTree::NewNode() {
  NodeId id;
  if (!free_nodes_.empty()) {
    id = free_nodes_.back();
    free_nodes_.pop_back();
  } else {
    id = static_cast<NodeId>(nodes_.size());
    nodes_.emplace_back();
  }
  nodes_[id] = Node{};
  nodes_[id].alive = true;
  return id;
}

PrefixTree::Match PrefixTree::MatchPrefix(std::span<const int32_t> tokens) const {
  Match m;
  NodeId cur = root();
  size_t pos = 0;
  while (pos < tokens.size()) {
    const Node& n = nodes_[cur];
    auto it = n.children.find(tokens[pos]);
    if (it == n.children.end()) break;
    const Node& c = nodes_[it->second];
    m.path.push_back(it->second);
    int32_t k = CommonPrefix(c.tokens, tokens.subspan(pos));
    pos += static_cast<size_t>(k);
    if (k < static_cast<int32_t>(c.tokens.size())) break;
    cur = it->second;
  }
  m.lcp = static_cast<int32_t>(pos);
  return m;
}

std::vector<std::pair<int32_t, CheckpointId>> PrefixTree::CheckpointsOnPath(std::span<const int32_t> tokens,
                                                                             int32_t limit) const {
  Match m = MatchPrefix(tokens);
  std::vector<std::pair<int32_t, CheckpointId>> out;
  uint64_t h = kFnvOffset;
  int32_t hashed = 0;
  for (NodeId id : m.path) {
    const Node& n = nodes_[id];
    if (n.end() > m.lcp || n.end() > limit) break;
    if (n.ckpt == kNone) continue;
    h = HashTokens(tokens.subspan(static_cast<size_t>(hashed), static_cast<size_t>(n.end() - hashed)), h);
    hashed = n.end();
    const Checkpoint& c = ckpts_->Get(n.ckpt);
    if (c.pos == n.end() && c.prefix_hash == h) out.emplace_back(c.pos, c.id);
  }
  return out;
}

namespace {

class FixedAttention : public AttentionStrategy {
 public:
  explicit FixedAttention(int32_t len) : len_(len) {}
  int32_t Longest(int32_t limit) const override { return std::min(len_, limit); }

 private:
  int32_t len_;
};

class CheckpointListRecurrent : public RecurrentStrategy {
 public:
  explicit CheckpointListRecurrent(const std::vector<std::pair<int32_t, CheckpointId>>& list) : list_(list) {}
  ExactState Longest(int32_t limit) const override {
    ExactState best;  // zero state at 0
    for (const auto& [pos, id] : list_)
      if (pos <= limit && pos > best.pos) best = {pos, StateSource::kCheckpoint, id};
    return best;
  }

 private:
  const std::vector<std::pair<int32_t, CheckpointId>>& list_;
};

}  // namespace

TreeHit PrefixTree::FindResume(std::span<const int32_t> prompt) const {
  TreeHit hit;
  if (prompt.empty()) {
    hit.reason = "empty prompt";
    return hit;
  }
  Match m = MatchPrefix(prompt);
  hit.lcp = m.lcp;
  auto list = CheckpointsOnPath(prompt, m.lcp);
  FixedAttention attention(m.lcp);
  CheckpointListRecurrent recurrent(list);
  Agreement a = Coordinate(attention, recurrent, static_cast<int32_t>(prompt.size()) - 1);
  hit.resume_pos = a.state.pos;
  hit.ckpt = a.state.ckpt;
  if (hit.ckpt != kNone) {
    for (NodeId id : m.path)
      if (nodes_[id].ckpt == hit.ckpt) hit.node = id;
    REWIND_CHECK(hit.node != kNone && nodes_[hit.node].end() == hit.resume_pos);
  }
  hit.reason = ResumeReason(hit.lcp, hit.resume_pos, a.state.source, static_cast<int32_t>(prompt.size()));
  return hit;
}

std::vector<PageId> PrefixTree::PathPages(std::span<const int32_t> tokens, int32_t len) const {
  Match m = MatchPrefix(tokens);
  REWIND_CHECK_MSG(len >= 0 && len <= m.lcp, "PathPages(%d) beyond the match %d", len, m.lcp);
  std::vector<PageId> out;
  size_t k = 0;
  for (int32_t i = 0; i < EndPage(len); ++i) {
    int32_t q = std::min((i + 1) * page_tokens_, len) - 1;  // last position needed from page i
    while (nodes_[m.path[k]].end() <= q) ++k;
    const Node& n = nodes_[m.path[k]];
    REWIND_CHECK(n.start <= q);
    out.push_back(n.pages[static_cast<size_t>(i - FirstPage(n.start))]);
  }
  return out;
}

std::vector<int32_t> PrefixTree::BranchPoints(std::span<const int32_t> tokens) const {
  Match m = MatchPrefix(tokens);
  std::vector<int32_t> out;
  for (NodeId id : m.path) {
    const Node& n = nodes_[id];
    if (n.end() <= m.lcp && n.children.size() >= 2) out.push_back(n.end());
  }
  if (m.lcp > 0 && m.lcp < static_cast<int32_t>(tokens.size())) out.push_back(m.lcp);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

NodeId PrefixTree::SplitAt(NodeId id, int32_t pos) {
  NodeId up = NewNode();  // may reallocate nodes_: index afterwards
  Node& n = nodes_[id];
  Node& u = nodes_[up];
  REWIND_CHECK(n.start < pos && pos < n.end());
  u.parent = n.parent;
  u.start = n.start;
  u.tokens.assign(n.tokens.begin(), n.tokens.begin() + (pos - n.start));
  u.last_use = n.last_use;
  int32_t up_pages = EndPage(pos) - FirstPage(n.start);
  u.pages.assign(n.pages.begin(), n.pages.begin() + up_pages);
  if (pos % page_tokens_ != 0) pages_->Ref(u.pages.back());  // the straddling page is now held twice
  n.pages.erase(n.pages.begin(), n.pages.begin() + (FirstPage(pos) - FirstPage(n.start)));
  n.tokens.erase(n.tokens.begin(), n.tokens.begin() + (pos - n.start));
  n.start = pos;
  n.parent = up;
  u.children[n.tokens.front()] = id;
  nodes_[u.parent].children[u.tokens.front()] = up;
  return up;
}

NodeId PrefixTree::Insert(std::span<const int32_t> tokens, std::span<const PageId> pages,
                          std::span<const std::pair<int32_t, CheckpointId>> ckpts, uint64_t now) {
  const int32_t len = static_cast<int32_t>(tokens.size());
  REWIND_CHECK(static_cast<int32_t>(pages.size()) == EndPage(len));
  if (len == 0) return root();
  Match m = MatchPrefix(tokens);
  NodeId cur = root();
  if (!m.path.empty()) {
    cur = m.path.back();
    if (nodes_[cur].end() > m.lcp) cur = SplitAt(cur, m.lcp);
  }
  if (m.lcp < len) {
    NodeId leaf = NewNode();
    Node& l = nodes_[leaf];
    l.parent = cur;
    l.start = m.lcp;
    l.tokens.assign(tokens.begin() + m.lcp, tokens.end());
    l.pages.assign(pages.begin() + FirstPage(m.lcp), pages.end());
    for (PageId p : l.pages) pages_->Ref(p);
    nodes_[cur].children[l.tokens.front()] = leaf;
    cur = leaf;
  }
  const NodeId end_node = cur;
  if (!ckpts.empty()) {
    std::vector<uint64_t> hashes = PrefixHashes(tokens);
    for (const auto& [pos, id] : ckpts) {
      REWIND_CHECK(pos >= 0 && pos <= len);
      const Checkpoint& c = ckpts_->Get(id);
      REWIND_CHECK_MSG(c.pos == pos && c.prefix_hash == hashes[static_cast<size_t>(pos)],
                       "checkpoint %d does not serve the inserted prefix at %d", id, pos);
      if (pos == 0) continue;
      Match mp = MatchPrefix(tokens.first(static_cast<size_t>(pos)));
      NodeId at = mp.path.back();
      if (nodes_[at].end() > pos) at = SplitAt(at, pos);
      if (nodes_[at].ckpt == kNone) {
        nodes_[at].ckpt = id;
        ckpts_->Ref(id);
      }
    }
  }
  Touch(end_node, now);
  return end_node;
}

void PrefixTree::Touch(NodeId id, uint64_t now) {
  for (NodeId n = id; n != kNone; n = nodes_[n].parent) {
    nodes_[n].last_use = now;
    if (nodes_[n].ckpt != kNone) ckpts_->Touch(nodes_[n].ckpt, now);
  }
}

Lease PrefixTree::Pin(NodeId id) {
  REWIND_CHECK(node(id).alive);
  ++nodes_[id].pins;
  ++leases_;
  return Lease(this, id);
}

void PrefixTree::Unpin(NodeId id) {
  REWIND_CHECK_MSG(id >= 0 && id < static_cast<NodeId>(nodes_.size()) && nodes_[id].alive, "lease on dead node");
  REWIND_CHECK_MSG(nodes_[id].pins > 0 && leases_ > 0, "lease underflow on node %d", id);
  --nodes_[id].pins;
  --leases_;
}

std::vector<EvictionCandidate> PrefixTree::Candidates(std::span<const TreeRemoval> planned) const {
  const size_t n_nodes = nodes_.size();
  std::vector<char> removed(n_nodes, 0), ckpt_dropped(n_nodes, 0);
  std::map<PageId, int32_t> unrefs;
  for (const TreeRemoval& r : planned) {
    ckpt_dropped[r.node] = 1;
    if (r.whole_node) {
      removed[r.node] = 1;
      for (PageId p : nodes_[r.node].pages) ++unrefs[p];
    }
  }
  std::vector<int32_t> children(n_nodes, 0);
  std::vector<char> pinned(n_nodes, 0);
  for (NodeId id = 1; id < static_cast<NodeId>(n_nodes); ++id) {
    const Node& n = nodes_[id];
    if (!n.alive || removed[id]) continue;
    ++children[n.parent];
    if (n.pins > 0)
      for (NodeId a = id; a != kNone && !pinned[a]; a = nodes_[a].parent) pinned[a] = 1;
  }
  auto exclusive_pages = [&](const Node& n) {
    int32_t count = 0;
    for (PageId p : n.pages) {
      auto it = unrefs.find(p);
      if (pages_->RefCount(p) - (it == unrefs.end() ? 0 : it->second) == 1) ++count;
    }
    return count;
  };
  auto live_ckpt = [&](NodeId id) { return nodes_[id].ckpt != kNone && !ckpt_dropped[id]; };
  std::vector<EvictionCandidate> out;
  for (NodeId id = 1; id < static_cast<NodeId>(n_nodes); ++id) {
    const Node& n = nodes_[id];
    if (!n.alive || removed[id] || pinned[id]) continue;
    const bool leaf = children[id] == 0;
    if (!live_ckpt(id)) {
      if (leaf) {
        int32_t pages = exclusive_pages(n);
        out.push_back({EvictionCandidate::Kind::kLeaf, id, kNone, 0, pages * page_bytes_, pages, n.last_use, true});
      }
      continue;
    }
    const Checkpoint& c = ckpts_->Get(n.ckpt);
    if (c.refs != 1) continue;  // a sequence still holds it: evicting frees nothing
    int32_t prev = 0;
    for (NodeId a = n.parent; a != kNone; a = nodes_[a].parent)
      if (live_ckpt(a) && a != root()) {
        prev = nodes_[a].end();
        break;
      }
    int32_t pages = leaf ? exclusive_pages(n) : 0;
    out.push_back({EvictionCandidate::Kind::kCheckpoint, id, n.ckpt, c.pos - prev, c.bytes + pages * page_bytes_,
                   pages, std::max(n.last_use, c.last_use), leaf});
  }
  return out;
}

CheckpointId PrefixTree::Apply(const TreeRemoval& r) {
  Node& n = nodes_[r.node];
  REWIND_CHECK_MSG(r.node != root() && n.alive, "bad removal of node %d", r.node);
  CheckpointId freed = kNone;
  if (n.ckpt != kNone) {
    if (ckpts_->Unref(n.ckpt)) freed = n.ckpt;
    n.ckpt = kNone;
  }
  if (!r.whole_node) return freed;
  REWIND_CHECK_MSG(n.children.empty() && n.pins == 0, "removing node %d with children or leases", r.node);
  for (PageId p : n.pages) pages_->Unref(p);
  nodes_[n.parent].children.erase(n.tokens.front());
  n = Node{};
  free_nodes_.push_back(r.node);
  return freed;
}

std::string PrefixTree::DebugString() const {
  std::string o;
  for (NodeId id = 0; id < static_cast<NodeId>(nodes_.size()); ++id) {
    const Node& n = nodes_[id];
    if (!n.alive) continue;
    o += "node " + std::to_string(id) + " parent " + std::to_string(n.parent) + " [" + std::to_string(n.start) +
         "," + std::to_string(n.end()) + ") hash " + std::to_string(HashTokens(n.tokens)) + " ckpt " +
         std::to_string(n.ckpt) + " pins " + std::to_string(n.pins) + " use " + std::to_string(n.last_use) +
         " pages";
    for (PageId p : n.pages) o += " " + std::to_string(p);
    o += "\n";
  }
  return o;
}

std::vector<int32_t> PrefixTree::PathTokens(NodeId id) const {
  std::vector<NodeId> chain;
  for (NodeId n = id; n != root(); n = nodes_[n].parent) chain.push_back(n);
  std::vector<int32_t> out;
  for (auto it = chain.rbegin(); it != chain.rend(); ++it)
    out.insert(out.end(), nodes_[*it].tokens.begin(), nodes_[*it].tokens.end());
  return out;
}

void PrefixTree::CheckInvariants(std::vector<int32_t>* page_holders,
                                 std::map<CheckpointId, int32_t>* ckpt_holders) const {
  REWIND_CHECK(!nodes_.empty() && nodes_[0].alive && nodes_[0].parent == kNone && nodes_[0].tokens.empty());
  int32_t pins = 0, alive = 0;
  for (NodeId id = 0; id < static_cast<NodeId>(nodes_.size()); ++id) {
    const Node& n = nodes_[id];
    if (!n.alive) continue;
    ++alive;
    pins += n.pins;
    REWIND_CHECK(n.pins >= 0);
    for (const auto& [tok, c] : n.children) {
      REWIND_CHECK_MSG(c > 0 && c < static_cast<NodeId>(nodes_.size()) && nodes_[c].alive, "dead child %d", c);
      REWIND_CHECK_MSG(nodes_[c].parent == id && nodes_[c].start == n.end() && !nodes_[c].tokens.empty() &&
                           nodes_[c].tokens.front() == tok,
                       "node %d: child %d misplaced", id, c);
    }
    if (id == root()) continue;
    REWIND_CHECK(n.parent != kNone && nodes_[n.parent].alive && !n.tokens.empty());
    REWIND_CHECK_MSG(nodes_[n.parent].children.count(n.tokens.front()) &&
                         nodes_[n.parent].children.at(n.tokens.front()) == id,
                     "node %d not linked from its parent", id);
    REWIND_CHECK_MSG(static_cast<int32_t>(n.pages.size()) == EndPage(n.end()) - FirstPage(n.start),
                     "node %d holds %zu pages for [%d, %d)", id, n.pages.size(), n.start, n.end());
    for (PageId p : n.pages) ++(*page_holders)[static_cast<size_t>(p)];
    if (n.ckpt != kNone) {
      ++(*ckpt_holders)[n.ckpt];
      const Checkpoint& c = ckpts_->Get(n.ckpt);
      REWIND_CHECK_MSG(c.pos == n.end() && CheckpointTable::Serves(c, PathTokens(id)),
                       "node %d: checkpoint %d does not serve its path (I2)", id, n.ckpt);
    }
  }
  REWIND_CHECK_MSG(pins == leases_, "pins %d != leases %d", pins, leases_);
  REWIND_CHECK(alive == node_count());
}

}  // namespace rw::memory
