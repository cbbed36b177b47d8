// HybridCache::TreeSnapshot / TreeViewJson: the prefix tree, the running sequences and the disk tier as JSON,
// for the web page's memory view (GET /cache/tree). Ids, positions and sizes only: no tokens. The snapshot is
// taken on the engine thread at a bounded cost (no token prefix is rebuilt or hashed twice for a checkpoint);
// the disk index is read and the JSON written on the caller's thread.
#include <nlohmann/json.hpp>
#include <algorithm>
#include <optional>
#include <set>
#include <unordered_set>

#include "engine/hybrid_cache_impl.h"

namespace rw::engine {

struct HybridCache::TreeView {
  struct Ckpt {
    memory::CheckpointId id = memory::kNone;
    int32_t pos = 0;
    int64_t bytes = 0;
    std::optional<uint64_t> chain;  // disk-tier key, when known (computed within this call's budget or before)
    bool remote = false;
  };
  struct Node {
    memory::NodeId id = 0, parent = 0;
    int32_t start = 0, end = 0;
    size_t pages = 0;
    int32_t pins = 0;
    uint64_t last_use = 0;
    std::optional<Ckpt> ckpt;
  };
  struct Seq {
    memory::SeqId id = 0;
    int32_t pos = 0;
    int64_t node = 0;
    bool idle = false;
    int64_t reserve = 0;
    std::vector<Ckpt> ckpts;
  };
  uint64_t clock = 0;
  int32_t page_tokens = 0;
  size_t nodes_total = 0;
  std::vector<Node> nodes;
  std::vector<Seq> seqs;
};

std::shared_ptr<const HybridCache::TreeView> HybridCache::TreeSnapshot(int32_t max_nodes, int32_t max_new_hashes) {
  Impl& im = *impl_;
  const memory::MemoryManager& m = *im.mm;
  const memory::PrefixTree& tree = m.tree();
  auto view = std::make_shared<TreeView>();
  std::unordered_set<memory::CheckpointId> seen;
  int32_t budget = max_new_hashes;
  // `prefix` is only called for a checkpoint met for the first time, while the budget lasts.
  auto ckpt = [&](memory::CheckpointId id, const auto& prefix) {
    const memory::Checkpoint& c = m.checkpoints().Get(id);
    TreeView::Ckpt out{id, c.pos, c.bytes, std::nullopt, false};
    seen.insert(id);
    auto it = im.view_keys.find(id);
    if (it == im.view_keys.end() && budget > 0 && (im.store || im.remote)) {
      --budget;
      const std::vector<int32_t> p = prefix();
      Impl::ViewKeys k;
      if (static_cast<int32_t>(p.size()) == c.pos) {
        if (im.store) k.chain = im.store->Chain(p);
        k.remote = im.remote && im.remote->HasState(p);
      }
      it = im.view_keys.emplace(id, k).first;
    }
    if (it != im.view_keys.end()) {
      if (im.store && it->second.chain != 0) out.chain = it->second.chain;
      out.remote = it->second.remote;
    }
    return out;
  };
  int32_t listed = 0;
  for (memory::NodeId id = 1; id < tree.node_id_end() && listed < max_nodes; ++id) {
    if (!tree.alive(id)) continue;
    const auto& n = tree.node(id);
    ++listed;
    TreeView::Node v{id, n.parent, n.start, n.end(), n.pages.size(), n.pins, n.last_use, std::nullopt};
    if (n.ckpt != memory::kNone) v.ckpt = ckpt(n.ckpt, [&] { return tree.PathTokens(id); });
    view->nodes.push_back(std::move(v));
  }
  for (memory::SeqId sid : m.sequence_ids()) {
    const memory::Sequence& s = m.sequence(sid);
    TreeView::Seq v{sid, s.pos(), s.lease.held() ? static_cast<int64_t>(s.lease.node()) : int64_t{memory::kNone},
                    s.idle, static_cast<int64_t>(s.reserve), {}};
    for (memory::CheckpointId c : s.checkpoints) {
      const int32_t pos = std::min<int32_t>(m.checkpoints().Get(c).pos, static_cast<int32_t>(s.tokens.size()));
      v.ckpts.push_back(ckpt(c, [&] { return std::vector<int32_t>(s.tokens.begin(), s.tokens.begin() + pos); }));
    }
    view->seqs.push_back(std::move(v));
  }
  // Forget the keys of checkpoints gone (and of those past max_nodes: recomputed if they come back in view).
  for (auto it = im.view_keys.begin(); it != im.view_keys.end();)
    it = seen.count(it->first) ? std::next(it) : im.view_keys.erase(it);
  view->clock = m.now();
  view->page_tokens = m.config().page_tokens;
  view->nodes_total = tree.node_count() - 1;
  return view;
}

std::string HybridCache::TreeViewJson(const TreeView& view) const {
  using nlohmann::json;
  const Impl& im = *impl_;
  // Disk-tier states by (end, chain); a RAM checkpoint is "also on disk" when the store holds its prefix's state.
  // The store is thread-safe: its index is read here, not on the engine thread.
  const std::vector<memory::ContentStore::StateInfo> stored =
      im.store ? im.store->States() : std::vector<memory::ContentStore::StateInfo>{};
  std::set<std::pair<int32_t, uint64_t>> on_disk, in_ram;
  for (const auto& e : stored) on_disk.insert({e.end, e.chain});
  auto ckpt_json = [&](const TreeView::Ckpt& c) {
    json disk = false;
    if (c.chain) {
      in_ram.insert({c.pos, *c.chain});
      disk = on_disk.count({c.pos, *c.chain}) != 0;
    } else if (im.store) {
      disk = nullptr;  // not looked at yet (a later poll tells)
    }
    return json{{"id", c.id}, {"pos", c.pos}, {"bytes", c.bytes}, {"disk", disk}, {"remote", c.remote}};
  };
  json nodes = json::array();
  for (const auto& n : view.nodes)
    nodes.push_back({{"id", n.id},
                     {"parent", n.parent},
                     {"start", n.start},
                     {"end", n.end},
                     {"pages", n.pages},
                     {"pins", n.pins},
                     {"last_use", n.last_use},
                     {"ckpt", n.ckpt ? ckpt_json(*n.ckpt) : json(nullptr)}});
  json seqs = json::array();
  for (const auto& s : view.seqs) {
    json ck = json::array();
    for (const auto& c : s.ckpts) ck.push_back(ckpt_json(c));
    seqs.push_back({{"id", s.id},
                    {"pos", s.pos},
                    {"node", s.node},
                    {"idle", s.idle},
                    {"reserve", s.reserve},
                    {"checkpoints", std::move(ck)}});
  }
  json disk = json::array();  // disk-tier states whose checkpoint is not in RAM
  for (const auto& e : stored)
    if (!in_ram.count({e.end, e.chain})) disk.push_back({{"pos", e.end}, {"bytes", e.bytes}});
  const memory::ContentStoreStats ds = im.store ? im.store->Stats() : memory::ContentStoreStats{};
  json out = {{"clock", view.clock},
              {"page_tokens", view.page_tokens},
              {"nodes_total", view.nodes_total},
              {"nodes", std::move(nodes)},
              {"sequences", std::move(seqs)},
              {"disk_only", std::move(disk)},
              {"disk_tier", !im.cfg.disk_dir.empty()},
              {"disk_files", stored.size()},
              {"disk_bytes", ds.stored_bytes},
              {"disk_limit_bytes", im.cfg.disk_bytes},
              {"remote_tier", im.remote != nullptr}};
  return out.dump();
}

}  // namespace rw::engine
