// HybridCache's disk tier over the content-addressed store (memory/content_store.h): checkpoints of finished
// requests and of evictions are copied (RAM to RAM) into the store's bounded queue and written by its writer
// thread; on a miss, the request's own thread reads the deepest stored state serving the prompt, with the pages
// RAM lacks (FetchDisk), and the engine thread copies them into the cache (ImportDisk).
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <limits>
#include <tuple>

#include "base/check.h"
#include "base/log.h"
#include "base/timer.h"
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

// A state on its way to the store: waits in ContentStore::WaitVisible. The store is held weakly: a ticket outliving
// the cache (a response still waiting while the server shuts down) finds it gone and does not wait.
class StoreTicket final : public PersistTicket {
 public:
  StoreTicket(std::weak_ptr<memory::ContentStore> store, int32_t end, uint64_t chain)
      : store_(std::move(store)), end_(end), chain_(chain) {}
  Outcome Wait(std::chrono::milliseconds timeout) const override {
    const std::shared_ptr<memory::ContentStore> store = store_.lock();
    if (!store) return Outcome::kNotStored;
    switch (store->WaitVisible(end_, chain_, std::chrono::steady_clock::now() + timeout)) {
      case memory::Visibility::kVisible: return Outcome::kVisible;
      case memory::Visibility::kNotStored: return Outcome::kNotStored;
      case memory::Visibility::kTimedOut: break;
    }
    return Outcome::kTimedOut;
  }
  int32_t position() const override { return end_; }

 private:
  std::weak_ptr<memory::ContentStore> store_;
  int32_t end_;
  uint64_t chain_;
};

}  // namespace

int32_t HybridCache::Impl::MinSavedTokens() const {
  // A state is worth its bytes (written, copied, read back) when the prefill it saves is worth at least a 16th of
  // its size in attention KV: at the 0.8B shape (18 MiB state, 12 KiB of KV per token) about 100 tokens, so the
  // near-duplicate states RAM keeps a few tokens apart (prompt end, generation header) are stored once.
  const int64_t kv_per_token = std::max<int64_t>(1, mm->config().page_bytes / cfg.page_tokens);
  return cfg.disk_min_saved_tokens >= 0
             ? cfg.disk_min_saved_tokens
             : static_cast<int32_t>(std::clamp<int64_t>(mm->config().state_bytes / (16 * kv_per_token), 1, 256));
}

void HybridCache::Impl::OpenStore() {
  auto backend = memory::DirectoryStore::Open(cfg.disk_dir);
  if (!backend.ok()) {
    LOG_WARN("cache: disk tier off: %s", backend.error().ToString().c_str());
    return;
  }
  RemoveOldFormat(cfg.disk_dir);
  memory::ContentStoreConfig sc;
  sc.identity = memory::StoreIdentity(fingerprint, kv_label);
  sc.page_tokens = cfg.page_tokens;
  sc.kv_bytes_per_token = mm->config().page_bytes / cfg.page_tokens;
  sc.max_bytes = cfg.disk_bytes;
  sc.queue_bytes = cfg.disk_queue_bytes;
  sc.half_life = mm->config().half_life;
  disk_min_saved_tokens = MinSavedTokens();
  auto s = memory::ContentStore::Open(std::move(backend).value(), sc);
  if (!s.ok()) {
    LOG_WARN("cache: disk tier off: %s", s.error().ToString().c_str());
    return;
  }
  store = std::move(s).value();
}

memory::StorePut HybridCache::Impl::MakePut(std::span<const int32_t> prefix, memory::CheckpointId ckpt,
                                           std::span<const memory::PageId> pages, std::span<const int32_t> page_ends,
                                           int64_t saved_tokens) const {
  const int32_t P = kv->page_size();
  const size_t k_row = kv->k_row_bytes(), v_row = kv->v_row_bytes();
  memory::StorePut put;
  put.tokens.assign(prefix.begin(), prefix.end());
  const model::StateCheckpoint& state = ckpts.at(ckpt);
  put.state_owner = state.Share();  // the writer reads the immutable snapshot itself: no copy on this thread
  put.state = std::string_view(reinterpret_cast<const char*>(state.data().data()), state.data().size_bytes());
  for (int32_t end : page_ends) {
    const int32_t i = (end - 1) / P;
    const size_t rows = static_cast<size_t>(end - i * P);
    std::string bytes;
    bytes.reserve(rows * (k_row + v_row) * static_cast<size_t>(kv->config().n_layers));
    for (int32_t l = 0; l < kv->config().n_layers; ++l) {  // [layer][K rows | V rows]
      const model::KvStorage& view = *kv;  // the const views read device-resident pages
      bytes.append(reinterpret_cast<const char*>(view.K(l, pages[static_cast<size_t>(i)])), rows * k_row);
      bytes.append(reinterpret_cast<const char*>(view.V(l, pages[static_cast<size_t>(i)])), rows * v_row);
    }
    put.pages.emplace_back(end, std::move(bytes));
  }
  put.saved_tokens = saved_tokens;
  return put;
}

bool HybridCache::Impl::PersistCheckpoint(std::span<const int32_t> prefix, memory::CheckpointId ckpt,
                                          std::span<const memory::PageId> pages, int64_t saved_tokens, bool urgent) {
  if (!store || prefix.empty() || store->HasState(prefix)) return false;
  const double t0 = NowSeconds();
  // Copies only: never waits for the disk.
  const bool queued =
      store->Enqueue(MakePut(prefix, ckpt, pages, store->MissingPages(prefix), saved_tokens), urgent);
  counters.persisted += queued ? 1 : 0;
  counters.disk_enqueue_seconds += NowSeconds() - t0;
  NoteDropped(!queued, "disk", static_cast<int32_t>(prefix.size()));
  return queued;
}

void HybridCache::Impl::NoteDropped(bool dropped, const char* tier, int32_t end) {
  bool& incident = tier[0] == 'd' ? disk_drop_incident : remote_drop_incident;
  if (dropped && !incident)
    LOG_WARN("cache: %s tier: checkpoint at %d not queued: the writer's queue is full (counted in /metrics; "
             "logged once until a checkpoint is queued again)", tier, end);
  if (!dropped && incident) LOG_INFO("cache: %s tier: the writer keeps up again", tier);
  incident = dropped;
}

bool HybridCache::Impl::ShareCheckpoint(std::span<const int32_t> prefix, memory::CheckpointId ckpt,
                                        std::span<const memory::PageId> pages, int64_t saved_tokens) {
  if (!remote || prefix.empty() || remote->HasState(prefix)) return false;
  const bool queued = remote->Enqueue(MakePut(prefix, ckpt, pages, remote->MissingPages(prefix), saved_tokens));
  NoteDropped(!queued, "remote", static_cast<int32_t>(prefix.size()));
  return queued;
}

std::shared_ptr<const PersistTicket> HybridCache::Impl::PersistPath(std::span<const int32_t> tokens,
                                                                   std::span<const int32_t> branch_prefix) {
  if (!store && !remote) return nullptr;
  const memory::PrefixTree& tree = mm->tree();
  const auto on_path = tree.CheckpointsOnPath(tokens, static_cast<int32_t>(tokens.size()));
  // The disk tier: the states worth their bytes, each saving at least disk_min_saved_tokens beyond the previous
  // stored one of the path. The deepest (the response's end, where the next turn resumes) is queued first, ahead
  // of everything else in the writer's queue and with all the pages it needs: a crash right after the response
  // then loses the least (docs/cache-budget.md, "Durability").
  std::vector<std::tuple<int32_t, memory::CheckpointId, int32_t>> to_disk;  // (pos, checkpoint, saved)
  int32_t prev = 0;  // the previous state of the path on disk (or queued)
  for (const auto& [pos, ckpt] : on_path) {
    if (!store) break;
    const std::span<const int32_t> prefix = tokens.subspan(0, static_cast<size_t>(pos));
    if (store->HasState(prefix)) {
      prev = pos;
    } else if (pos - prev >= disk_min_saved_tokens) {
      to_disk.emplace_back(pos, ckpt, pos - prev);
      prev = pos;
    }
  }
  auto to_store = [&](size_t k, bool urgent) {
    const auto& [pos, ckpt, saved] = to_disk[k];
    PersistCheckpoint(tokens.subspan(0, static_cast<size_t>(pos)), ckpt, tree.PathPages(tokens, pos), saved, urgent);
  };
  if (!to_disk.empty()) to_store(to_disk.size() - 1, true);
  for (size_t k = 0; k + 1 < to_disk.size(); ++k) to_store(k, false);
  // The ticket of the deepest state the disk tier stores or has queued (the end state just queued, unless the queue
  // refused it or it saves too little beyond a stored one): what a response waits for before its last event.
  std::shared_ptr<const PersistTicket> ticket;
  for (auto it = on_path.rbegin(); store && it != on_path.rend() && !ticket; ++it) {
    if (it->first > prev) continue;  // deeper than every stored or selected state: not on its way to the disk
    const std::span<const int32_t> prefix = tokens.subspan(0, static_cast<size_t>(it->first));
    if (store->HasState(prefix)) ticket = std::make_shared<StoreTicket>(store, it->first, store->Chain(prefix));
  }
  // The remote tier, deepest first: the end of the conversation (where its next turn, maybe on another replica,
  // resumes) and the last state at or before the answer's message start (`branch`: where the next turn resumes
  // when the answer is rewritten) always, and earlier states through the same value-per-byte door, counted back.
  int32_t next = std::numeric_limits<int32_t>::max();
  int32_t branch_pos = -1;  // the deepest state of the path at or before the branch
  for (const auto& [pos, ckpt] : on_path)
    if (!branch_prefix.empty() && pos <= static_cast<int32_t>(branch_prefix.size())) branch_pos = pos;
  for (auto it = on_path.rbegin(); remote && it != on_path.rend(); ++it) {
    const auto& [pos, ckpt] = *it;
    const std::span<const int32_t> prefix = tokens.subspan(0, static_cast<size_t>(pos));
    const int32_t before = std::next(it) == on_path.rend() ? 0 : std::next(it)->first;
    const bool must = it == on_path.rbegin() || pos == branch_pos;
    if (remote->HasState(prefix) || ((must || next - pos >= disk_min_saved_tokens) &&
                                     ShareCheckpoint(prefix, ckpt, tree.PathPages(tokens, pos), pos - before)))
      next = pos;
  }
  // Not shared exactly there (no checkpoint at the branch, a cancelled request): replicas waiting stop waiting.
  if (remote && !branch_prefix.empty() && !remote->HasState(branch_prefix)) remote->Withdraw(branch_prefix);
  return ticket;
}

void HybridCache::Impl::Spill(const memory::EvictPlan& plan) {
  const memory::PrefixTree& tree = mm->tree();
  for (const memory::TreeRemoval& r : plan.removals) {
    if (!tree.alive(r.node) || tree.node(r.node).ckpt == memory::kNone) continue;
    const std::vector<int32_t> tokens = tree.PathTokens(r.node);
    const int32_t pos = static_cast<int32_t>(tokens.size());
    const auto before = tree.CheckpointsOnPath(tokens, pos - 1);
    const int32_t prev = before.empty() ? 0 : before.back().first;
    if (pos - prev >= disk_min_saved_tokens &&
        PersistCheckpoint(tokens, tree.node(r.node).ckpt, tree.PathPages(tokens, pos), pos - prev))
      ++counters.spilled;
  }
}

Expected<int32_t> HybridCache::Impl::ImportStored(std::span<const int32_t> prefix, const std::string& state,
                                                  std::span<const std::string> pages, int32_t from_page) {
  const int32_t end = static_cast<int32_t>(prefix.size());
  const int32_t P = kv->page_size();
  const size_t layers = static_cast<size_t>(kv->config().n_layers);
  const size_t k_row = kv->k_row_bytes(), v_row = kv->v_row_bytes();
  const size_t k_page = kv->k_page_bytes(), v_page = kv->v_page_bytes();
  if (state.size() % sizeof(float) != 0) return Error::Corrupt("stored state size is not a float array");
  // Import's layout: [page][layer][K page | V page]; a stored page is [layer][K rows | V rows] of its rows only.
  std::string kv_bytes(pages.size() * layers * (k_page + v_page), '\0');
  for (size_t j = 0; j < pages.size(); ++j) {
    const int32_t first = (from_page + static_cast<int32_t>(j)) * P;
    const size_t rows = static_cast<size_t>(std::min(end, first + P) - first);
    const std::string& src = pages[j];
    if (src.size() != rows * (k_row + v_row) * layers)
      return Error::Corrupt("stored page size does not match this cache (other KV type?)");
    for (size_t l = 0; l < layers; ++l) {  // rows past `end` stay zero
      char* dst = kv_bytes.data() + (j * layers + l) * (k_page + v_page);
      const char* in = src.data() + l * rows * (k_row + v_row);
      std::memcpy(dst, in, rows * k_row);
      std::memcpy(dst + k_page, in + rows * k_row, rows * v_row);
    }
  }
  std::vector<float> floats(state.size() / sizeof(float));
  std::memcpy(floats.data(), state.data(), state.size());
  return Import(prefix, floats, kv_bytes, from_page);
}

Expected<int32_t> HybridCache::Impl::ImportFetched(std::span<const int32_t> prompt, int32_t end, int32_t first_page,
                                                   const std::string& state, std::span<const std::string> pages,
                                                   const char* tier) {
  if (end <= 0 || end >= static_cast<int32_t>(prompt.size())) return 0;
  const memory::TreeHit hit = mm->FindTreeResume(prompt);
  if (hit.resume_pos >= end) return 0;  // RAM serves as much (another request brought it meanwhile)
  const int32_t from_page = hit.resume_pos / kv->page_size();
  if (from_page < first_page) return 0;  // RAM lost pages the read relied on: compute instead
  const std::span<const int32_t> prefix = prompt.subspan(0, static_cast<size_t>(end));
  auto r = ImportStored(prefix, state, pages.subspan(static_cast<size_t>(from_page - first_page)), from_page);
  if (!r.ok()) LOG_WARN("cache: %s tier: state at %d not loaded: %s", tier, end, r.error().ToString().c_str());
  return r;
}

bool HybridCache::has_disk() const { return impl_->store != nullptr; }

int32_t HybridCache::RamResume(std::span<const int32_t> prompt) const {
  return impl_->mm->FindTreeResume(prompt).resume_pos;
}

std::shared_ptr<const DiskFetch> HybridCache::FetchDisk(std::span<const int32_t> prompt,
                                                        const std::function<int32_t()>& ram_resume) const {
  const Impl& im = *impl_;
  if (!im.store || !im.cfg.use_cache || prompt.size() < 2) return nullptr;
  const double t0 = NowSeconds();
  const int32_t last = static_cast<int32_t>(prompt.size()) - 1;
  if (im.store->StatesOnPath(prompt, 0, last).empty()) return nullptr;  // the index only: no read, no engine task
  const int32_t ram = ram_resume();
  const int32_t from_page = ram / im.kv->page_size();  // pages below are never read by the import (RAM has them)
  for (int32_t end : im.store->StatesOnPath(prompt, ram, last)) {
    const std::span<const int32_t> prefix = prompt.subspan(0, static_cast<size_t>(end));
    auto state = im.store->ReadState(prefix);
    auto pages = state.ok() ? im.store->ReadPages(prefix, from_page) : Expected<std::vector<std::string>>(state.error());
    if (pages.ok()) {
      auto fetch = std::make_shared<DiskFetch>();
      fetch->end = end;
      fetch->first_page = from_page;
      fetch->state = std::move(state).value();
      fetch->pages = std::move(pages).value();
      fetch->reader = std::this_thread::get_id();
      fetch->seconds = NowSeconds() - t0;
      return fetch;
    }
    LOG_WARN("cache: disk tier: state at %d skipped: %s", end, pages.error().ToString().c_str());
    if (pages.error().kind != ErrorKind::kIo) im.store->Forget(prefix);  // never tried again
  }
  return nullptr;
}

int32_t HybridCache::Impl::ImportDisk(std::span<const int32_t> prompt, const DiskFetch& fetch) {
  if (!store) return 0;
  auto imported = ImportFetched(prompt, fetch.end, fetch.first_page, fetch.state, fetch.pages, "disk");
  if (!imported.ok() && imported.error().kind == ErrorKind::kCorrupt)  // does not fit this cache: never tried again
    store->Forget(prompt.subspan(0, static_cast<size_t>(fetch.end)));
  const int32_t r = imported.ok() ? *imported : 0;
  if (r > 0) {
    ++counters.disk_loaded;
    counters.disk_reads_on_engine += fetch.reader == std::this_thread::get_id() ? 1 : 0;
    counters.disk_read_seconds += fetch.seconds;
  }
  return r;
}

Status HybridCache::Persist() {
  Impl& im = *impl_;
  if (im.remote) im.remote->Flush();  // finished requests queued theirs already
  if (!im.store) return Status::Ok();
  const memory::PrefixTree& tree = im.mm->tree();
  uint64_t dropped = 0;
  for (memory::NodeId id = 1; id < tree.node_id_end(); ++id) {
    if (!tree.alive(id) || tree.node(id).ckpt == memory::kNone) continue;
    const std::vector<int32_t> tokens = tree.PathTokens(id);
    const int32_t pos = static_cast<int32_t>(tokens.size());
    const auto before = tree.CheckpointsOnPath(tokens, pos - 1);
    const int32_t saved = pos - (before.empty() ? 0 : before.back().first);
    if (saved < im.disk_min_saved_tokens || im.store->HasState(tokens)) continue;
    auto persist = [&] { return im.PersistCheckpoint(tokens, tree.node(id).ckpt, tree.PathPages(tokens, pos), saved); };
    if (!persist()) {  // the queue is full: wait for the writer, then once more
      im.store->Flush();
      if (!persist()) ++dropped;
    }
    if (im.store->Stats().queued_bytes > im.cfg.disk_queue_bytes / 2) im.store->Flush();  // keep all of them
  }
  im.store->Flush();
  if (dropped > 0)  // a checkpoint larger than the whole queue: counted by PersistCheckpoint, reported here
    return Error::Exhausted(std::to_string(dropped) + " checkpoints not persisted: larger than the disk writer's queue");
  return Status::Ok();
}

}  // namespace rw::engine
