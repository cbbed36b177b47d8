// HybridCache::TreeJson: the prefix tree, the running sequences and the disk tier as JSON, for the web page's
// memory view (GET /cache/tree). Ids, positions and sizes only: no tokens.
#include <nlohmann/json.hpp>
#include <algorithm>
#include <set>

#include "engine/hybrid_cache_impl.h"

namespace rw::engine {

std::string HybridCache::TreeJson(int32_t max_nodes) const {
  using nlohmann::json;
  const Impl& im = *impl_;
  const memory::MemoryManager& m = *im.mm;
  const memory::PrefixTree& tree = m.tree();
  // Disk-tier states by (end, chain); a RAM checkpoint is "also on disk" when the store holds its prefix's state.
  const std::vector<memory::ContentStore::StateInfo> stored =
      im.store ? im.store->States() : std::vector<memory::ContentStore::StateInfo>{};
  std::set<std::pair<int32_t, uint64_t>> on_disk, in_ram;
  for (const auto& e : stored) on_disk.insert({e.end, e.chain});
  auto ckpt_json = [&](memory::CheckpointId id, std::span<const int32_t> prefix) {
    const memory::Checkpoint& c = m.checkpoints().Get(id);
    bool disk = false;
    if (im.store && static_cast<int32_t>(prefix.size()) == c.pos) {
      const std::pair<int32_t, uint64_t> key{c.pos, im.store->Chain(prefix)};
      in_ram.insert(key);
      disk = on_disk.count(key) != 0;
    }
    const bool remote = im.remote && static_cast<int32_t>(prefix.size()) == c.pos && im.remote->HasState(prefix);
    return json{{"id", id}, {"pos", c.pos}, {"bytes", c.bytes}, {"disk", disk}, {"remote", remote}};
  };

  json nodes = json::array();
  int32_t listed = 0;
  for (memory::NodeId id = 1; id < tree.node_id_end() && listed < max_nodes; ++id) {
    if (!tree.alive(id)) continue;
    const auto& n = tree.node(id);
    ++listed;
    nodes.push_back({{"id", id},
                     {"parent", n.parent},
                     {"start", n.start},
                     {"end", n.end()},
                     {"pages", n.pages.size()},
                     {"pins", n.pins},
                     {"last_use", n.last_use},
                     {"ckpt", n.ckpt == memory::kNone ? json(nullptr) : ckpt_json(n.ckpt, tree.PathTokens(id))}});
  }
  json seqs = json::array();
  for (memory::SeqId sid : m.sequence_ids()) {
    const memory::Sequence& s = m.sequence(sid);
    json ck = json::array();
    for (memory::CheckpointId c : s.checkpoints) {
      const int32_t pos = std::min<int32_t>(m.checkpoints().Get(c).pos, static_cast<int32_t>(s.tokens.size()));
      ck.push_back(ckpt_json(c, std::span<const int32_t>(s.tokens).subspan(0, static_cast<size_t>(pos))));
    }
    seqs.push_back({{"id", sid},
                    {"pos", s.pos()},
                    {"node", s.lease.held() ? s.lease.node() : memory::kNone},
                    {"idle", s.idle},
                    {"reserve", s.reserve},
                    {"checkpoints", std::move(ck)}});
  }
  json disk = json::array();  // disk-tier states whose checkpoint is not in RAM
  for (const auto& e : stored)
    if (!in_ram.count({e.end, e.chain})) disk.push_back({{"pos", e.end}, {"bytes", e.bytes}});
  const memory::ContentStoreStats ds = im.store ? im.store->Stats() : memory::ContentStoreStats{};
  json out = {{"clock", m.now()},
              {"page_tokens", m.config().page_tokens},
              {"nodes_total", tree.node_count() - 1},
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
