// HybridCache::TreeJson: the prefix tree, the running sequences and the disk tier as JSON, for the web page's
// memory view (GET /cache/tree). Ids, positions and sizes only: no tokens.
#include <nlohmann/json.hpp>
#include <set>

#include "engine/hybrid_cache_impl.h"

namespace rw::engine {

std::string HybridCache::TreeJson(int32_t max_nodes) const {
  using nlohmann::json;
  const Impl& im = *impl_;
  const memory::MemoryManager& m = *im.mm;
  const memory::PrefixTree& tree = m.tree();
  std::set<uint64_t> on_disk;  // prefix hashes with a file in the disk tier
  for (const auto& e : im.disk_index) on_disk.insert(e.prefix_hash);
  auto ckpt_json = [&](memory::CheckpointId id) {
    const memory::Checkpoint& c = m.checkpoints().Get(id);
    return json{{"id", id}, {"pos", c.pos}, {"bytes", c.bytes}, {"disk", on_disk.count(c.prefix_hash) != 0}};
  };
  std::set<uint64_t> in_ram;
  for (const auto& [id, c] : m.checkpoints().all()) in_ram.insert(c.prefix_hash);

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
                     {"ckpt", n.ckpt == memory::kNone ? json(nullptr) : ckpt_json(n.ckpt)}});
  }
  json seqs = json::array();
  for (memory::SeqId sid : m.sequence_ids()) {
    const memory::Sequence& s = m.sequence(sid);
    json ck = json::array();
    for (memory::CheckpointId c : s.checkpoints) ck.push_back(ckpt_json(c));
    seqs.push_back({{"id", sid},
                    {"pos", s.pos()},
                    {"node", s.lease.held() ? s.lease.node() : memory::kNone},
                    {"idle", s.idle},
                    {"reserve", s.reserve},
                    {"checkpoints", std::move(ck)}});
  }
  json disk = json::array();  // disk-tier files whose checkpoint is not in RAM
  uint64_t disk_bytes = 0;
  for (const auto& e : im.disk_index) {
    disk_bytes += e.bytes;
    if (!in_ram.count(e.prefix_hash)) disk.push_back({{"pos", e.pos}, {"bytes", e.bytes}});
  }
  json out = {{"clock", m.now()},
              {"page_tokens", m.config().page_tokens},
              {"nodes_total", tree.node_count() - 1},
              {"nodes", std::move(nodes)},
              {"sequences", std::move(seqs)},
              {"disk_only", std::move(disk)},
              {"disk_tier", !im.cfg.disk_dir.empty()},
              {"disk_files", im.disk_index.size()},
              {"disk_bytes", disk_bytes},
              {"disk_limit_bytes", im.cfg.disk_bytes}};
  return out.dump();
}

}  // namespace rw::engine
