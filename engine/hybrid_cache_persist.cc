// HybridCache persistence: checkpoint files (memory/persist_format.h) for the disk tier, restarts and
// llama-server slot save/restore. A file holds a token prefix, the recurrent state after it and the KV pages of
// the prefix; importing one rebuilds a tree path without running the model.
#include <algorithm>
#include <cstring>
#include <filesystem>

#include "base/check.h"
#include "base/file.h"
#include "base/hash.h"
#include "base/log.h"
#include "engine/hybrid_cache.h"
#include "engine/hybrid_cache_impl.h"
#include "memory/persist_format.h"

namespace rw::engine {
namespace {

// [page][attn_layer][K | V][page_tokens][row bytes] spans of the pages covering [0, pos) (rows in the cache's
// K and V types; the file records them).
std::vector<std::span<const std::byte>> KvParts(const model::KvStorage& kv, std::span<const memory::PageId> pages) {
  std::vector<std::span<const std::byte>> parts;
  for (memory::PageId p : pages)
    for (int32_t l = 0; l < kv.config().n_layers; ++l) {
      parts.emplace_back(reinterpret_cast<const std::byte*>(kv.K(l, p)), kv.k_page_bytes());
      parts.emplace_back(reinterpret_cast<const std::byte*>(kv.V(l, p)), kv.v_page_bytes());
    }
  return parts;
}

std::span<const std::byte> Bytes(std::span<const float> f) {
  return {reinterpret_cast<const std::byte*>(f.data()), f.size_bytes()};
}

std::string FileName(std::span<const int32_t> tokens) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "ckpt-%016llx-%zu.rwck", static_cast<unsigned long long>(HashTokens(tokens)),
                tokens.size());
  return buf;
}

}  // namespace

Expected<int32_t> HybridCache::Impl::Import(std::span<const int32_t> tokens, std::span<const float> state,
                                            std::string_view kv_bytes) {
  const int32_t len = static_cast<int32_t>(tokens.size());
  const int32_t P = kv->page_size();
  const size_t k_page = kv->k_page_bytes(), v_page = kv->v_page_bytes();
  const size_t want_kv = static_cast<size_t>((len + P - 1) / P) * kv->config().n_layers * (k_page + v_page);
  if (len == 0 || len > cfg.n_ctx) return Error::InvalidArgument("saved prefix length " + std::to_string(len) + " invalid");
  if (state.size_bytes() != states->bytes_per_state() || kv_bytes.size() != want_kv)
    return Error::Corrupt("saved state/KV sizes do not match this cache (other page size or KV type?)");
  for (int32_t t : tokens)
    if (t < 0 || t >= model->config().n_vocab) return Error::Corrupt("saved prefix has an invalid token id");
  std::vector<int32_t> probe(tokens.begin(), tokens.end());
  probe.push_back(0);  // the hit rule keeps one token to evaluate: ask for one more
  REWIND_ASSIGN_OR_RETURN(memory::AcquirePlan acq, mm->PlanAcquire(probe, true));
  if (acq.hit.resume_pos == len) return len;  // already cached
  const memory::SeqId seq = mm->Commit(acq);
  Exec(acq.ops);
  auto drop = [&] {
    auto rel = mm->PlanRelease(seq, false);
    REWIND_CHECK(rel.ok());
    mm->Commit(*rel);
    Exec(rel->ops);
  };
  std::span<const int32_t> rest = tokens.subspan(static_cast<size_t>(acq.hit.resume_pos));
  const std::pair<memory::SeqId, int32_t> grow{seq, static_cast<int32_t>(rest.size())};
  const int64_t need = mm->AppendBytes(seq, grow.second);
  if (Status s = MakeRoom(mm->RoomForAppends({&grow, 1}), static_cast<int32_t>(need / mm->config().page_bytes)); !s.ok()) {
    drop();
    return s.error();
  }
  auto app = mm->PlanAppend(seq, rest);
  REWIND_CHECK(app.ok());
  mm->Commit(*app);
  Exec(app->ops);
  NoteTaken(app->take);
  const size_t k_row = kv->k_row_bytes(), v_row = kv->v_row_bytes();
  for (int32_t q = acq.hit.resume_pos; q < len; ++q) {
    const memory::PageId page = app->page_table[static_cast<size_t>(q / P)];
    for (int32_t l = 0; l < kv->config().n_layers; ++l) {
      const size_t base = (static_cast<size_t>(q / P) * kv->config().n_layers + l) * (k_page + v_page);
      std::memcpy(kv->K(l, page) + (q % P) * k_row, kv_bytes.data() + base + (q % P) * k_row, k_row);
      std::memcpy(kv->V(l, page) + (q % P) * v_row, kv_bytes.data() + base + k_page + (q % P) * v_row, v_row);
    }
  }
  Status s = states->Restore(model::StateCheckpoint::FromData(std::vector<float>(state.begin(), state.end())),
                             app->state_out);
  REWIND_CHECK(s.ok());
  ForgetSlot(app->state_out);
  ForgetSlot(app->state_in);
  if (!Checkpoint(seq)) {
    drop();
    return Error::Exhausted("cache budget: no room for the imported checkpoint");
  }
  auto rel = mm->PlanRelease(seq, true);
  REWIND_CHECK(rel.ok());
  mm->Commit(*rel);
  Exec(rel->ops);
  ++counters.loaded;
  return len;
}

void HybridCache::Impl::DropDiskFile(const std::string& file, bool remove) {
  std::erase_if(disk_index, [&](const auto& o) { return o.file == file; });  // never tried again
  if (!remove) return;
  std::error_code ec;  // a corrupt file is deleted so that a later spill of the same prefix can rewrite it
  std::filesystem::remove(cfg.disk_dir + "/" + file, ec);
}

int32_t HybridCache::Impl::FetchFromDisk(std::span<const int32_t> prompt) {
  if (disk_index.empty() || prompt.size() < 2) return 0;
  const memory::TreeHit hit = mm->FindTreeResume(prompt);
  // Candidates serving a longer prefix than RAM does, deepest first; a bad file is dropped and the next tried.
  std::vector<memory::CheckpointIndexEntry> cands;
  for (const auto& e : disk_index) {
    if (e.pos <= hit.resume_pos || e.pos >= static_cast<int32_t>(prompt.size())) continue;
    if (HashTokens(prompt.subspan(0, static_cast<size_t>(e.pos))) != e.prefix_hash) continue;
    cands.push_back(e);
  }
  std::sort(cands.begin(), cands.end(), [](const auto& a, const auto& b) { return a.pos > b.pos; });
  for (const auto& e : cands) {
    auto f = memory::ReadCheckpointFile(cfg.disk_dir + "/" + e.file, FileKey());
    const bool usable = f.ok() && f->tokens.size() == static_cast<size_t>(e.pos) &&
                        std::equal(f->tokens.begin(), f->tokens.end(), prompt.begin()) &&
                        f->state.size() % sizeof(float) == 0;
    if (!usable) {
      LOG_WARN("cache: disk tier: skipping %s: %s", e.file.c_str(),
               f.ok() ? "its tokens do not match its index entry" : f.error().ToString().c_str());
      DropDiskFile(e.file, !f.ok() && f.error().kind == ErrorKind::kCorrupt);
      continue;
    }
    std::vector<float> state(f->state.size() / sizeof(float));
    std::memcpy(state.data(), f->state.data(), f->state.size());
    auto r = Import(f->tokens, state, f->kv);
    if (r.ok()) return *r;
    LOG_WARN("cache: disk tier: %s not loaded: %s", e.file.c_str(), r.error().ToString().c_str());
    if (r.error().kind == ErrorKind::kResourceExhausted) return 0;
  }
  return 0;
}

Status HybridCache::Impl::LoadDisk() {
  const std::string index = cfg.disk_dir + "/index";
  if (!FileExists(index)) return Status::Ok();
  REWIND_ASSIGN_OR_RETURN(auto entries, memory::ReadCheckpointIndex(index, fingerprint));
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.pos < b.pos; });
  disk_index = entries;
  for (const auto& e : entries) {
    auto f = memory::ReadCheckpointFile(cfg.disk_dir + "/" + e.file, FileKey());
    if (!f.ok()) {
      LOG_WARN("cache: skipping %s", f.error().ToString().c_str());
      DropDiskFile(e.file, f.error().kind == ErrorKind::kCorrupt);
      continue;
    }
    if (static_cast<int32_t>(f->tokens.size()) != e.pos || f->prefix_hash != e.prefix_hash) {
      LOG_WARN("cache: %s does not match its index entry; skipped", e.file.c_str());
      DropDiskFile(e.file, false);
      continue;
    }
    std::vector<float> state(f->state.size() / sizeof(float));
    if (state.size() * sizeof(float) != f->state.size()) continue;
    std::memcpy(state.data(), f->state.data(), f->state.size());
    auto r = Import(f->tokens, state, f->kv);
    if (!r.ok()) {
      LOG_WARN("cache: %s not loaded: %s", e.file.c_str(), r.error().ToString().c_str());
      if (r.error().kind == ErrorKind::kResourceExhausted) break;
    }
  }
  return Status::Ok();
}

Expected<memory::CheckpointIndexEntry> HybridCache::Impl::WriteNodeFile(memory::NodeId id, int64_t room) {
  const memory::PrefixTree& tree = mm->tree();
  REWIND_CHECK(tree.alive(id) && tree.node(id).ckpt != memory::kNone);
  const std::vector<int32_t> tokens = tree.PathTokens(id);
  const std::string name = FileName(tokens);
  const std::string path = cfg.disk_dir + "/" + name;
  uint64_t size = 0;
  if (!FileExists(path)) {
    const std::vector<memory::PageId> pages = tree.PathPages(tokens, static_cast<int32_t>(tokens.size()));
    std::string bytes =
        memory::EncodeCheckpointFile(FileKey(), tokens, Bytes(ckpts.at(tree.node(id).ckpt).data()), KvParts(*kv, pages));
    if (room >= 0 && static_cast<int64_t>(bytes.size()) > room)
      return Error::Exhausted("disk tier full (--cache-disk)");
    REWIND_RETURN_IF_ERROR(WriteFileAtomic(path, bytes));
    size = bytes.size();
    ++counters.persisted;
  } else {
    std::error_code ec;
    size = std::filesystem::file_size(path, ec);
    if (ec) return Error::Io(path + ": " + ec.message());
  }
  return memory::CheckpointIndexEntry{name, static_cast<int32_t>(tokens.size()), HashTokens(tokens), size};
}

void HybridCache::Impl::Spill(const memory::EvictPlan& plan) {
  if (Status s = MakeDirs(cfg.disk_dir); !s.ok()) {
    LOG_WARN("cache: disk tier: %s", s.error().ToString().c_str());
    return;
  }
  uint64_t total = 0;
  for (const auto& e : disk_index) total += e.bytes;
  bool changed = false;
  for (const memory::TreeRemoval& r : plan.removals) {
    const memory::PrefixTree& tree = mm->tree();
    if (!tree.alive(r.node) || tree.node(r.node).ckpt == memory::kNone) continue;
    const int64_t room =
        cfg.disk_bytes > 0 ? std::max<int64_t>(0, cfg.disk_bytes - static_cast<int64_t>(total)) : -1;
    if (room == 0) break;
    auto e = WriteNodeFile(r.node, room);
    if (!e.ok()) {
      if (e.error().kind != ErrorKind::kResourceExhausted)
        LOG_WARN("cache: disk tier: spill failed: %s", e.error().ToString().c_str());
      continue;
    }
    bool present = std::any_of(disk_index.begin(), disk_index.end(), [&](const auto& o) { return o.file == e->file; });
    if (present) continue;
    disk_index.push_back(*e);
    total += e->bytes;
    ++counters.spilled;
    changed = true;
  }
  if (!changed) return;
  std::sort(disk_index.begin(), disk_index.end(), [](const auto& a, const auto& b) { return a.pos < b.pos; });
  if (Status s = memory::WriteCheckpointIndex(cfg.disk_dir + "/index", fingerprint, disk_index); !s.ok())
    LOG_WARN("cache: disk tier: index not written: %s", s.error().ToString().c_str());
}

Status HybridCache::Persist() {
  Impl& im = *impl_;
  if (im.cfg.disk_dir.empty() || !im.cfg.use_cache) return Status::Ok();
  REWIND_RETURN_IF_ERROR(MakeDirs(im.cfg.disk_dir));
  const memory::PrefixTree& tree = im.mm->tree();
  std::vector<memory::CheckpointIndexEntry> entries;
  uint64_t total = 0;
  for (memory::NodeId id = 1; id < tree.node_id_end(); ++id) {
    if (!tree.alive(id) || tree.node(id).ckpt == memory::kNone) continue;
    const int64_t room = im.cfg.disk_bytes > 0 ? im.cfg.disk_bytes - static_cast<int64_t>(total) : -1;
    auto e = im.WriteNodeFile(id, room);
    if (!e.ok()) {
      // Over --cache-disk, or an existing file whose size cannot be read: skip it, as before.
      if (e.error().kind == ErrorKind::kResourceExhausted || FileExists(im.cfg.disk_dir + "/" +
                                                                          FileName(tree.PathTokens(id))))
        continue;
      return e.error();
    }
    total += e->bytes;
    entries.push_back(*e);
  }
  // Keep index entries of files persisted earlier whose checkpoints were evicted from RAM since: they stay on
  // disk and serve later misses (FetchFromDisk).
  for (const auto& old : im.disk_index) {
    bool present = std::any_of(entries.begin(), entries.end(), [&](const auto& e) { return e.file == old.file; });
    if (!present && FileExists(im.cfg.disk_dir + "/" + old.file) &&
        (im.cfg.disk_bytes <= 0 || total + old.bytes <= static_cast<uint64_t>(im.cfg.disk_bytes))) {
      entries.push_back(old);
      total += old.bytes;
    }
  }
  // Files of the old index that no longer fit under --cache-disk are deleted, so the folder stays bounded.
  std::vector<memory::CheckpointIndexEntry> old_index = std::move(im.disk_index);
  im.disk_index = entries;
  REWIND_RETURN_IF_ERROR(memory::WriteCheckpointIndex(im.cfg.disk_dir + "/index", im.fingerprint, entries));
  for (const auto& old : old_index) {
    bool kept = std::any_of(entries.begin(), entries.end(), [&](const auto& e) { return e.file == old.file; });
    if (kept) continue;
    std::error_code ec;
    std::filesystem::remove(im.cfg.disk_dir + "/" + old.file, ec);
    if (ec) LOG_WARN("cache: disk tier: could not delete %s: %s", old.file.c_str(), ec.message().c_str());
  }
  return Status::Ok();
}

Expected<uint64_t> HybridCache::SaveSequence(memory::SeqId seq, const std::string& path) {
  Impl& im = *impl_;
  if (!im.mm->has_sequence(seq)) return Error::NotFound("no sequence " + std::to_string(seq));
  const memory::Sequence& s = im.mm->sequence(seq);
  if (s.tokens.empty()) return Error::InvalidArgument("the sequence holds no tokens");
  im.Materialize(s.live);
  std::string bytes = memory::EncodeCheckpointFile(im.FileKey(), s.tokens, Bytes(im.states->SlotData(s.live)),
                                                   KvParts(*im.kv, s.pages));
  REWIND_RETURN_IF_ERROR(WriteFileAtomic(path, bytes));
  return static_cast<uint64_t>(bytes.size());
}

Expected<int32_t> HybridCache::LoadIntoTree(const std::string& path) {
  Impl& im = *impl_;
  REWIND_ASSIGN_OR_RETURN(memory::CheckpointFile f, memory::ReadCheckpointFile(path, im.FileKey()));
  if (f.state.size() % sizeof(float) != 0) return Error::Corrupt(path + ": state size is not a float array");
  std::vector<float> state(f.state.size() / sizeof(float));
  std::memcpy(state.data(), f.state.data(), f.state.size());
  return im.Import(f.tokens, state, f.kv);
}

}  // namespace rw::engine
