// HybridCache persistence: checkpoint files (memory/persist_format.h) for llama-server slot save/restore, and
// the import that the disk tier (hybrid_cache_store.cc) shares with them. A file holds a token prefix, the
// recurrent state after it and the KV pages of the prefix; importing one rebuilds a tree path without running
// the model.
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

}  // namespace

Expected<int32_t> HybridCache::Impl::Import(std::span<const int32_t> tokens, std::span<const float> state,
                                            std::string_view kv_bytes, int32_t first_page) {
  const int32_t len = static_cast<int32_t>(tokens.size());
  const int32_t P = kv->page_size();
  const size_t k_page = kv->k_page_bytes(), v_page = kv->v_page_bytes();
  const size_t want_kv =
      static_cast<size_t>((len + P - 1) / P - first_page) * kv->config().n_layers * (k_page + v_page);
  if (len == 0 || len > cfg.n_ctx) return Error::InvalidArgument("saved prefix length " + std::to_string(len) + " invalid");
  if (state.size_bytes() != states->bytes_per_state() || kv_bytes.size() != want_kv)
    return Error::Corrupt("saved state/KV sizes do not match this cache (other page size or KV type?)");
  for (int32_t t : tokens)
    if ((t < 0 || t >= model->config().n_vocab) && !model::IsImageTokenId(t))
      return Error::Corrupt("saved prefix has an invalid token id");
  std::vector<int32_t> probe(tokens.begin(), tokens.end());
  probe.push_back(0);  // the hit rule keeps one token to evaluate: ask for one more
  REWIND_ASSIGN_OR_RETURN(memory::AcquirePlan acq, mm->PlanAcquire(probe, true));
  if (acq.hit.resume_pos == len) return len;  // already cached
  if (acq.hit.resume_pos < first_page * P)
    return Error::Unavailable("the cache no longer holds the prefix the saved pages start after");
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
  const memory::MemoryManager::Room room = mm->RoomForAppends({&grow, 1});
  if (Status s = MakeRoom(room.bytes, room.pages); !s.ok()) {
    drop();
    return s.error();
  }
  auto app = mm->PlanAppend(seq, rest);
  REWIND_CHECK(app.ok());
  mm->Commit(*app);
  Exec(app->ops);
  NoteTaken(app->take);
  const size_t k_row = kv->k_row_bytes(), v_row = kv->v_row_bytes();
  for (int32_t q = acq.hit.resume_pos; q < len;) {  // the rows of one page at a time
    const memory::PageId page = mm->sequence(seq).pages[static_cast<size_t>(q / P)];
    const int32_t r0 = q % P, n = std::min(len - q, P - r0);
    for (int32_t l = 0; l < kv->config().n_layers; ++l) {
      const size_t base = (static_cast<size_t>(q / P - first_page) * kv->config().n_layers + l) * (k_page + v_page);
      const auto* src = reinterpret_cast<const uint8_t*>(kv_bytes.data()) + base;
      const Status w = kv->WriteRows(l, page, r0, n, src + r0 * k_row, src + k_page + r0 * v_row);
      REWIND_CHECK_MSG(w.ok(), "importing KV rows: %s", w.error().message.c_str());
    }
    q += n;
  }
  Status s = states->Restore(model::StateCheckpoint::FromData(state),
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
