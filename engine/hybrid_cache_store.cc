// HybridCache's disk tier over the content-addressed store (memory/content_store.h): checkpoints of finished
// requests and of evictions are copied (RAM to RAM) into the store's bounded queue and written by its writer
// thread; a miss loads the deepest stored state serving the prompt, with the pages RAM lacks.
#include <algorithm>
#include <cstring>
#include <filesystem>

#include "base/check.h"
#include "base/log.h"
#include "engine/hybrid_cache.h"
#include "engine/hybrid_cache_impl.h"
#include "memory/dir_store.h"

namespace rw::engine {

namespace {

// Files of the one-file-per-checkpoint format (before the store): never read, deleted so the bound holds.
void RemoveOldFormat(const std::string& dir) {
  std::error_code ec;
  int removed = 0;
  for (auto it = std::filesystem::directory_iterator(dir, ec); !ec && it != std::filesystem::directory_iterator();
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!it->is_regular_file() || !(name == "index" || name.ends_with(".rwck"))) continue;
    std::error_code rm;
    if (std::filesystem::remove(it->path(), rm)) ++removed;
  }
  if (removed > 0)
    LOG_WARN("cache: removed %d files of the old disk-tier format in %s (not readable by this version)", removed,
             dir.c_str());
}

}  // namespace

void HybridCache::Impl::OpenStore() {
  auto backend = memory::DirectoryStore::Open(cfg.disk_dir);
  if (!backend.ok()) {
    LOG_WARN("cache: disk tier off: %s", backend.error().ToString().c_str());
    return;
  }
  RemoveOldFormat(cfg.disk_dir);
  memory::ContentStoreConfig sc;
  sc.identity = memory::StoreIdentity(fingerprint, static_cast<uint32_t>(cfg.kv_type));
  sc.page_tokens = cfg.page_tokens;
  sc.kv_bytes_per_token = mm->config().page_bytes / cfg.page_tokens;
  sc.max_bytes = cfg.disk_bytes;
  sc.queue_bytes = cfg.disk_queue_bytes;
  sc.half_life = mm->config().half_life;
  auto s = memory::ContentStore::Open(std::move(backend).value(), sc);
  if (!s.ok()) {
    LOG_WARN("cache: disk tier off: %s", s.error().ToString().c_str());
    return;
  }
  store = std::move(s).value();
}

bool HybridCache::Impl::PersistCheckpoint(std::span<const int32_t> prefix, memory::CheckpointId ckpt,
                                          std::span<const memory::PageId> pages, int64_t saved_tokens) {
  if (!store || prefix.empty() || store->HasState(prefix)) return false;
  const int32_t P = kv->page_size();
  const size_t row_bytes = static_cast<size_t>(kv->config().row_width) * kv->elem_bytes();
  memory::StorePut put;
  put.tokens.assign(prefix.begin(), prefix.end());
  std::span<const float> state = ckpts.at(ckpt).data();
  put.state.assign(reinterpret_cast<const char*>(state.data()), state.size_bytes());
  for (int32_t end : store->MissingPages(prefix)) {
    const int32_t i = (end - 1) / P;
    const size_t rows = static_cast<size_t>(end - i * P) * row_bytes;
    std::string bytes;
    bytes.reserve(rows * 2 * static_cast<size_t>(kv->config().n_layers));
    for (int32_t l = 0; l < kv->config().n_layers; ++l) {
      bytes.append(reinterpret_cast<const char*>(kv->K(l, pages[static_cast<size_t>(i)])), rows);
      bytes.append(reinterpret_cast<const char*>(kv->V(l, pages[static_cast<size_t>(i)])), rows);
    }
    put.pages.emplace_back(end, std::move(bytes));
  }
  put.saved_tokens = saved_tokens;
  if (!store->Enqueue(std::move(put))) return false;
  ++counters.persisted;
  return true;
}

void HybridCache::Impl::PersistPath(std::span<const int32_t> tokens) {
  if (!store) return;
  const memory::PrefixTree& tree = mm->tree();
  int32_t prev = 0;
  for (const auto& [pos, ckpt] : tree.CheckpointsOnPath(tokens, static_cast<int32_t>(tokens.size()))) {
    const std::span<const int32_t> prefix = tokens.subspan(0, static_cast<size_t>(pos));
    if (!store->HasState(prefix)) PersistCheckpoint(prefix, ckpt, tree.PathPages(tokens, pos), pos - prev);
    prev = pos;
  }
}

void HybridCache::Impl::Spill(const memory::EvictPlan& plan) {
  const memory::PrefixTree& tree = mm->tree();
  for (const memory::TreeRemoval& r : plan.removals) {
    if (!tree.alive(r.node) || tree.node(r.node).ckpt == memory::kNone) continue;
    const std::vector<int32_t> tokens = tree.PathTokens(r.node);
    const int32_t pos = static_cast<int32_t>(tokens.size());
    const auto before = tree.CheckpointsOnPath(tokens, pos - 1);
    const int32_t prev = before.empty() ? 0 : before.back().first;
    if (PersistCheckpoint(tokens, tree.node(r.node).ckpt, tree.PathPages(tokens, pos), pos - prev))
      ++counters.spilled;
  }
}

int32_t HybridCache::Impl::FetchFromDisk(std::span<const int32_t> prompt) {
  if (!store || prompt.size() < 2) return 0;
  const memory::TreeHit hit = mm->FindTreeResume(prompt);
  const int32_t P = kv->page_size();
  const int32_t layers = kv->config().n_layers;
  const size_t row_bytes = static_cast<size_t>(kv->config().row_width) * kv->elem_bytes();
  const size_t page_layer_bytes = static_cast<size_t>(P) * row_bytes;
  const int32_t from_page = hit.resume_pos / P;  // pages below are never read by Import (RAM serves them)
  for (int32_t end : store->StatesOnPath(prompt, hit.resume_pos, static_cast<int32_t>(prompt.size()) - 1)) {
    const std::span<const int32_t> prefix = prompt.subspan(0, static_cast<size_t>(end));
    auto state = store->ReadState(prefix);
    auto pages = state.ok() ? store->ReadPages(prefix, from_page) : Expected<std::vector<std::string>>(state.error());
    std::string kv_bytes;
    if (pages.ok()) {
      const size_t n_pages = pages->size();
      kv_bytes.assign(n_pages * static_cast<size_t>(layers) * 2 * page_layer_bytes, '\0');
      for (size_t j = 0; j < n_pages && pages.ok(); ++j) {
        const int32_t first = (from_page + static_cast<int32_t>(j)) * P;
        const size_t rows = static_cast<size_t>(std::min(end, first + P) - first) * row_bytes;
        const std::string& src = (*pages)[j];
        if (src.size() != rows * 2 * static_cast<size_t>(layers)) {
          pages = Error::Corrupt("stored page size does not match this cache (other KV type?)");
          break;
        }
        for (int32_t l = 0; l < 2 * layers; ++l)  // [layer][K | V] in both layouts; rows past `end` stay zero
          std::memcpy(kv_bytes.data() + (j * 2 * static_cast<size_t>(layers) + static_cast<size_t>(l)) * page_layer_bytes,
                      src.data() + static_cast<size_t>(l) * rows, rows);
      }
    }
    if (!pages.ok() || state->size() % sizeof(float) != 0) {
      const Error e = pages.ok() ? Error::Corrupt("stored state size is not a float array") : pages.error();
      LOG_WARN("cache: disk tier: state at %d skipped: %s", end, e.ToString().c_str());
      if (e.kind != ErrorKind::kIo) store->Forget(prefix);  // never tried again
      continue;
    }
    std::vector<float> floats(state->size() / sizeof(float));
    std::memcpy(floats.data(), state->data(), state->size());
    auto r = Import(prefix, floats, kv_bytes, from_page);
    if (r.ok()) return *r;
    LOG_WARN("cache: disk tier: state at %d not loaded: %s", end, r.error().ToString().c_str());
    if (r.error().kind == ErrorKind::kResourceExhausted) return 0;
  }
  return 0;
}

Status HybridCache::Persist() {
  Impl& im = *impl_;
  if (!im.store) return Status::Ok();
  const memory::PrefixTree& tree = im.mm->tree();
  for (memory::NodeId id = 1; id < tree.node_id_end(); ++id) {
    if (!tree.alive(id) || tree.node(id).ckpt == memory::kNone) continue;
    const std::vector<int32_t> tokens = tree.PathTokens(id);
    const int32_t pos = static_cast<int32_t>(tokens.size());
    const auto before = tree.CheckpointsOnPath(tokens, pos - 1);
    im.PersistCheckpoint(tokens, tree.node(id).ckpt, tree.PathPages(tokens, pos),
                         pos - (before.empty() ? 0 : before.back().first));
    if (im.store->Stats().queued_bytes > im.cfg.disk_queue_bytes / 2) im.store->Flush();  // keep all of them
  }
  im.store->Flush();
  return Status::Ok();
}

}  // namespace rw::engine
