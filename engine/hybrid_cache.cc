// HybridCache: executes memory/ plans on the model's storage and drives the forward. See hybrid_cache.h.
#include "engine/hybrid_cache.h"

#include <algorithm>
#include <cstring>
#include <set>
#include <string>

#include "base/check.h"
#include "base/cpu_features.h"
#include "base/hash.h"
#include "base/log.h"
#include "engine/hybrid_cache_impl.h"
#include "memory/placement.h"

namespace rw::engine {

using memory::DataOp;
using memory::SeqId;

HybridCache::~HybridCache() = default;

void HybridCache::Impl::Exec(const std::vector<DataOp>& ops) {
  for (const DataOp& op : ops) {
    if (auto* o = std::get_if<memory::CopyPageOp>(&op)) {
      kv->CopyPage(o->from, o->to, kv->page_size());
      ++counters.page_copies;
    } else if (auto* o = std::get_if<memory::ZeroStateOp>(&op)) {
      states->Clear(o->slot);
      ForgetSlot(o->slot);
    } else if (auto* o = std::get_if<memory::CopyStateOp>(&op)) {
      Materialize(o->from);
      states->CopySlot(o->from, o->to);
      ForgetSlot(o->to);
    } else if (auto* o = std::get_if<memory::RestoreCheckpointOp>(&op)) {
      auto it = ckpts.find(o->ckpt);
      REWIND_CHECK_MSG(it != ckpts.end(), "restore of checkpoint %d without a buffer", o->ckpt);
      Status s = states->Restore(it->second, o->slot);
      REWIND_CHECK_MSG(s.ok(), "checkpoint restore failed: %s", s.error().message.c_str());
      ForgetSlot(o->slot);
      ++counters.restores;
    } else if (auto* o = std::get_if<memory::SaveCheckpointOp>(&op)) {
      REWIND_CHECK(ckpts.count(o->ckpt) == 0);
      Materialize(o->slot);
      ckpts.emplace(o->ckpt, states->Snapshot(o->slot));
      ++counters.checkpoints_saved;
    } else if (auto* o = std::get_if<memory::ReplayStateOp>(&op)) {
      auto it = logs.find(o->from);
      REWIND_CHECK_MSG(it != logs.end(), "replay from slot %d without a log", o->from);
      REWIND_CHECK_MSG(pending.count(o->from) == 0, "replay from slot %d with a rollback pending", o->from);
      auto off = log_offset.find(o->from);
      const int32_t rows = o->count + (off != log_offset.end() ? off->second : 0);
      REWIND_CHECK_MSG(rows <= it->second.n_tokens, "replay of %d rows from a log of %d", rows, it->second.n_tokens);
      ++counters.replays;
      if (o->to == o->from && cfg.lazy_rollback) {
        // Lazy: the bytes stay at the log's start; the next forward from this slot re-applies the rows.
        log_offset.erase(o->from);
        if (rows > 0) {
          pending[o->from] = rows;
        } else {
          RecycleRows(std::move(it->second.rows));
          logs.erase(it);
        }
        continue;
      }
      Status s = model->ReplayState(o->from, o->to, it->second, rows, *states);
      REWIND_CHECK_MSG(s.ok(), "replay failed: %s", s.error().message.c_str());
      ForgetSlot(o->to);  // in place (to == from): the log's batch-start state is gone
    } else if (auto* o = std::get_if<memory::FreeCheckpointOp>(&op)) {
      REWIND_CHECK_MSG(ckpts.erase(o->ckpt) == 1, "free of checkpoint %d without a buffer", o->ckpt);
    }
  }
}

void HybridCache::Impl::Materialize(memory::SlotId slot) {
  auto p = pending.find(slot);
  if (p == pending.end()) return;
  auto it = logs.find(slot);
  REWIND_CHECK_MSG(it != logs.end(), "slot %d: a rollback pending without its log", slot);
  Status s = model->ReplayState(slot, slot, it->second, p->second, *states);
  REWIND_CHECK_MSG(s.ok(), "replay failed: %s", s.error().message.c_str());
  ForgetSlot(slot);
  ++counters.materialized;
}

Status HybridCache::Impl::MakeRoom(int64_t bytes, int32_t pages) {
  REWIND_ASSIGN_OR_RETURN(memory::EvictPlan plan, mm->PlanMakeRoom(bytes, pages));
  Evict(plan);
  return Status::Ok();
}

void HybridCache::Impl::Evict(const memory::EvictPlan& plan) {
  if (plan.removals.empty()) return;
  if (store || remote) Spill(plan);
  mm->Commit(plan);
  Exec(plan.ops);
  counters.evictions += plan.removals.size();
  counters.evicted_bytes += static_cast<uint64_t>(plan.bytes_freed);
}

BigVector<float> HybridCache::Impl::TakeRows(size_t floats) {
  spare_cap_floats = std::max(spare_cap_floats, 2 * floats);
  auto best = spare_rows.end();
  // A log never takes a buffer more than twice its size (a decode step's or a short chunk's the buffer of a
  // full one): the next full prompt chunk would find none, and a fresh large buffer costs its page faults again.
  const size_t most = 2 * std::max<size_t>(floats, internal::kBigBytes / sizeof(float));
  for (auto it = spare_rows.begin(); it != spare_rows.end(); ++it)
    if (it->capacity() >= floats && it->capacity() <= most &&
        (best == spare_rows.end() || it->capacity() < best->capacity()))
      best = it;
  if (best == spare_rows.end()) {
    // A fresh buffer. A log of at least half the largest one gets the largest's capacity: prompt chunks differ
    // by a few tokens (the first one is often shorter), and a buffer a few rows too small for every later chunk
    // would make each of them pay the fresh buffer's page faults (about 4% of a long prefill).
    BigVector<float> rows;
    const size_t largest = spare_cap_floats / 2;
    rows.reserve(floats >= largest / 2 ? largest : floats);
    return rows;
  }
  BigVector<float> rows = std::move(*best);
  spare_rows.erase(best);
  return rows;
}

void HybridCache::Impl::RecycleRows(BigVector<float>&& rows) {
  if (rows.capacity() == 0) return;
  spare_rows.push_back(std::move(rows));
  // Over the bounds, the smallest buffers go first (the large ones cost the most page faults to make again).
  auto total = [&] {
    size_t t = 0;
    for (const auto& r : spare_rows) t += r.capacity();
    return t;
  };
  const size_t max_count = 2 * static_cast<size_t>(cfg.n_seq_max) + 2;
  while (!spare_rows.empty() && (spare_rows.size() > max_count || total() > spare_cap_floats)) {
    auto smallest = std::min_element(spare_rows.begin(), spare_rows.end(),
                                     [](const auto& a, const auto& b) { return a.capacity() < b.capacity(); });
    spare_rows.erase(smallest);
  }
}

void HybridCache::Impl::ReturnFreePages() {
  const memory::PagePool& pool = mm->pages();
  int32_t last_used = 0, run = -1;
  for (int32_t id = 0; id < kv_touched; ++id) {
    if (pool.RefCount(id) == 0) {
      if (run < 0) run = id;
      continue;
    }
    if (run >= 0) kv->Discard(run, id - run);
    run = -1;
    last_used = id + 1;
  }
  if (run >= 0) kv->Discard(run, kv_touched - run);
  kv_touched = last_used;
}

bool HybridCache::Impl::Checkpoint(SeqId seq) {
  auto plan = mm->PlanCheckpoint(seq);
  if (!plan.ok()) {
    if (!MakeRoom(mm->CheckpointRoom(), 0).ok()) return false;
    plan = mm->PlanCheckpoint(seq);
    if (!plan.ok()) return false;
  }
  mm->Commit(*plan);
  Exec(plan->ops);
  return true;
}

uint64_t ModelFingerprint(const gguf::File& file) {
  // Metadata and tensor layout, plus samples of every tensor's bytes (start, middle, end): two files with the
  // same shapes but different weights never share persisted states (I2, I5), and nothing large is read.
  uint64_t h = file.Fingerprint();
  for (const auto& t : file.tensors()) {
    const uint64_t n = t.nbytes, k = std::min<uint64_t>(n, 64);
    for (uint64_t off : {uint64_t{0}, (n - k) / 2, n - k}) h = HashBytes(t.data + off, k, h);
  }
  return h;
}

Expected<std::unique_ptr<HybridCache>> HybridCache::Create(model::Model& model, const HybridCacheConfig& config) {
  if (config.page_tokens < 1 || config.page_tokens > 4096)
    return Error::InvalidArgument("cache page size must be in [1, 4096]");
  if (config.n_seq_max < 1) return Error::InvalidArgument("need at least one sequence slot");
  if (config.n_ctx < 1) return Error::InvalidArgument("context must be positive");
  if (config.checkpoint_every < 0) return Error::InvalidArgument("checkpoint interval must be >= 0");
  std::unique_ptr<HybridCache> hc(new HybridCache());
  hc->impl_ = std::make_unique<Impl>();
  Impl& im = *hc->impl_;
  im.model = &model;
  im.cfg = config;
  const model::ModelConfig& mc = model.config();
  REWIND_RETURN_IF_ERROR(model::CheckKvTypes(config.kv_type, mc.head_dim));
  memory::MemoryConfig m;
  m.page_tokens = config.page_tokens;
  m.page_bytes = static_cast<int64_t>(std::max<uint64_t>(1, mc.KvBytesPerToken(config.kv_type) * config.page_tokens));
  m.state_bytes = static_cast<int64_t>(std::max<uint64_t>(1, model.MakeStateShape().bytes_per_state()));
  m.budget_bytes = config.budget_bytes;
  m.max_slots = 2 * (config.n_seq_max + 1);  // two per live sequence, two for imports
  // The budget is hard (docs/cache-budget.md): the engine admits a request only when its reservation fits
  // beside the running ones, so the pool never needs more pages than the budget holds. Its memory is committed
  // on first use (model/kv_storage.h), so a large pool costs address space only.
  // The smallest useful cache holds one checkpoint and a sequence of one page (plus its copy-on-write page);
  // below that, refuse to start. Without a cache (--no-cache) the budget bounds only the running sequences:
  // it is made large enough for all of them at full context.
  // On a GPU the pages are device memory (docs/gpu.md): a pool of their own, and the budget holds checkpoints.
  m.pages_apart = model.device_name() != "cpu";
  const int64_t min_budget = m.state_bytes + (m.pages_apart ? 0 : 2 * m.page_bytes);
  if (!config.use_cache && !m.pages_apart) {
    const int64_t per_seq = ((int64_t{config.n_ctx} + config.page_tokens - 1) / config.page_tokens + 1) * m.page_bytes;
    m.budget_bytes = std::max({m.budget_bytes, min_budget, config.n_seq_max * per_seq + m.state_bytes});
  }
  if (m.budget_bytes < min_budget) {
    const int64_t mib = (min_budget + (1 << 20) - 1) >> 20;
    return Error::InvalidArgument("cache budget of " + std::to_string(m.budget_bytes >> 20) +
                                  " MiB cannot hold one recurrent checkpoint (" + std::to_string(m.state_bytes) +
                                  (m.pages_apart ? "" : " plus two pages (" + std::to_string(2 * m.page_bytes) + " B)") +
                                  ": use --cache-ram " + std::to_string(mib) + " or more, or --no-cache");
  }
  if (m.pages_apart) {
    const int64_t forward = static_cast<int64_t>(model.device_forward_bytes(config.forward_rows, config.forward_out_rows));
    REWIND_ASSIGN_OR_RETURN(m.max_pages, DevicePagePool(model, m, config.kv_type, config.device_bytes,
                                                        config.device_reserved_bytes, forward, config.n_seq_max,
                                                        config.n_ctx));
  }
  if (Status s = m.Validate(); !s.ok())
    return Error::InvalidArgument("cache: " + s.error().message + " (raise the cache budget)");
  im.mm = std::make_unique<memory::MemoryManager>(m);
  // Spacing inside long unstructured spans: at most checkpoint_every tokens, and closer when a state costs less
  // than the attention KV of that many tokens (a checkpoint then at most doubles the memory of the span it
  // covers, and an edit inside the span re-evaluates at most `interval` tokens); never closer than kMinInterval.
  constexpr int32_t kMinInterval = 64;
  const int64_t kv_per_token = std::max<int64_t>(1, m.page_bytes / config.page_tokens);
  im.interval = config.checkpoint_every == 0
                    ? 0
                    : static_cast<int32_t>(std::clamp<int64_t>(m.state_bytes / kv_per_token, kMinInterval,
                                                               std::max(kMinInterval, config.checkpoint_every)));
  REWIND_ASSIGN_OR_RETURN(im.kv, model::KvStorage::Create(model.MakeKvConfig(m.MaxPages(), config.page_tokens,
                                                                             config.kv_type)));
  REWIND_ASSIGN_OR_RETURN(im.states, model::StateStorage::Create(model.MakeStateShape(), m.max_slots));
  REWIND_RETURN_IF_ERROR(model.PlaceStorage(*im.kv, *im.states));  // on a GPU: device memory, allocated now
  // Snapshot buffers made ready off the engine thread: up to 4 states, at most 256 MiB (docs/checkpoints.md).
  if (config.use_cache && m.state_bytes > 0)
    im.states->KeepSpares(static_cast<size_t>(std::clamp<int64_t>((int64_t{256} << 20) / m.state_bytes, 1, 4)));
  uint64_t f = ModelFingerprint(model.file());
  // The KV types are not part of the fingerprint: persisted files name their types, so a file of another type
  // is refused with a message saying so (memory/persist_format.h) instead of as a foreign model.
  f = HashMix(f, static_cast<uint64_t>(config.page_tokens));
  // The scalar twins (no AVX2, or REWIND_NO_AVX2) round quantised dot products otherwise than the SIMD kernels,
  // which agree bit for bit whatever their width: their states and pages are kept apart.
  if (!CpuHasAvx2FmaF16c()) f = HashMix(f, 0x5ca1a7ull);
  // A GPU backend computes other bits than the CPU (docs/gpu.md): its states and pages are kept apart, per device.
  if (model.device_name() != "cpu") f = HashMix(f, HashString(model.device_description()));
  im.fingerprint = f;
  im.kv_label = kernels::KvTypesName(config.kv_type);
  if (!config.disk_dir.empty() && config.use_cache) im.OpenStore();
  if (!config.remote_url.empty() && config.use_cache) im.OpenRemote();
  return hc;
}

Expected<AcquireResult> HybridCache::Acquire(std::span<const int32_t> prompt,
                                             std::span<const int32_t> checkpoint_hints, bool use_cache,
                                             int32_t reserve_tokens, const remote::RemoteFetch* remote,
                                             const DiskFetch* disk) {
  Impl& im = *impl_;
  if (prompt.empty()) return Error::InvalidArgument("empty prompt");
  if (static_cast<int64_t>(prompt.size()) > im.cfg.n_ctx)
    return Error::OutOfRange("prompt of " + std::to_string(prompt.size()) + " tokens exceeds the context of " +
                             std::to_string(im.cfg.n_ctx));
  use_cache = use_cache && im.cfg.use_cache;
  const int32_t from_disk = use_cache && disk ? im.ImportDisk(prompt, *disk) : 0;
  const int32_t from_remote = use_cache && remote ? im.ImportRemote(prompt, *remote) : 0;
  const std::vector<int32_t> branches = use_cache ? im.mm->tree().BranchPoints(prompt) : std::vector<int32_t>{};
  auto planned = im.mm->PlanAcquire(prompt, use_cache, reserve_tokens);
  std::string fallback;
  if (!planned.ok() && planned.error().kind == ErrorKind::kResourceExhausted && use_cache &&
      !im.mm->HasReservations()) {
    // Alone, the request always fits; only pinning the cached prefix's checkpoints beside it does not.
    planned = im.mm->PlanAcquire(prompt, false, reserve_tokens);
    fallback = "the cached prefix's checkpoints do not fit in --cache-ram beside this request's reservation";
  }
  if (!planned.ok()) return planned.error();
  memory::AcquirePlan plan = std::move(planned).value();
  if (!fallback.empty()) {
    plan.hit.lcp = im.mm->FindTreeResume(prompt).lcp;
    plan.hit.reason = fallback;
  }
  const SeqId seq = im.mm->Commit(plan);
  im.Exec(plan.ops);
  ++im.counters.acquires;

  memory::PlacementInput in;
  in.prompt_size = static_cast<int32_t>(prompt.size());
  in.resume_pos = plan.hit.resume_pos;
  in.message_starts = checkpoint_hints;
  in.branch_points = branches;
  in.interval = im.interval;
  im.planned[seq] = use_cache ? memory::PlaceCheckpoints(in) : std::vector<int32_t>{};

  AcquireResult r;
  r.seq = seq;
  r.resume_pos = plan.hit.resume_pos;
  r.report.lcp = plan.hit.lcp;
  r.report.resume_pos = plan.hit.resume_pos;
  r.report.source = memory::StateSourceName(plan.hit.source);
  const int32_t reusable = std::min(plan.hit.lcp, static_cast<int32_t>(prompt.size()) - 1);
  r.report.extra_tokens = std::max(0, reusable - plan.hit.resume_pos);
  r.report.reason = plan.hit.reason;
  const bool checkpoint = plan.hit.source == memory::StateSource::kCheckpoint;
  if (from_remote > 0 && plan.hit.resume_pos == from_remote && checkpoint) {
    r.report.source = "remote";
    r.report.reason += " (checkpoint fetched from the remote tier)";
  } else if (from_disk > 0 && plan.hit.resume_pos == from_disk && checkpoint) {
    r.report.reason += " (checkpoint loaded from the disk tier)";
  }
  if (remote) {
    r.report.remote_bytes = remote->bytes;
    r.report.remote_ms = remote->seconds * 1e3;
  }
  return r;
}

int32_t HybridCache::MaxSequenceTokens() const {
  return std::min(impl_->mm->MaxReserveTokens(), impl_->cfg.n_ctx);
}

int32_t HybridCache::MaxChunk(SeqId seq, int32_t want) const {
  const int32_t pos = Position(seq);
  int32_t n = std::max(1, want);
  auto it = impl_->planned.find(seq);
  if (it != impl_->planned.end())
    for (int32_t p : it->second)
      if (p > pos) {
        n = std::min(n, p - pos);
        break;
      }
  return n;
}

Status HybridCache::Evaluate(std::span<const EvalItem> items, model::ForwardOutput* out, bool hidden_all,
                             int32_t top_k) {
  Impl& im = *impl_;
  if (items.empty()) return Error::InvalidArgument("empty batch");
  const int32_t n_vocab = im.model->config().n_vocab;
  std::set<SeqId> seen;
  for (const EvalItem& it : items) {
    if (!im.mm->has_sequence(it.seq)) return Error::InvalidArgument("unknown sequence " + std::to_string(it.seq));
    if (!seen.insert(it.seq).second) return Error::InvalidArgument("a sequence appears twice in one batch");
    if (it.tokens.empty()) return Error::InvalidArgument("batch item without tokens");
    const int32_t pos0 = Position(it.seq);
    for (size_t j = 0; j < it.tokens.size(); ++j) {
      const int32_t t = it.tokens[j];
      if ((t < 0 || t >= n_vocab) && !(it.images && it.images->Find(pos0 + static_cast<int32_t>(j))))
        return Error::InvalidArgument("token id " + std::to_string(t) + " out of range");
    }
    if (Position(it.seq) + static_cast<int64_t>(it.tokens.size()) > im.cfg.n_ctx)
      return Error::OutOfRange("sequence would exceed the context of " + std::to_string(im.cfg.n_ctx));
  }
  std::vector<std::pair<SeqId, int32_t>> grow;
  for (const EvalItem& it : items) grow.emplace_back(it.seq, static_cast<int32_t>(it.tokens.size()));
  // Inside their reservations the appends always find room; past one (a caller bug) the batch fails cleanly.
  const memory::MemoryManager::Room room = im.mm->RoomForAppends(grow);
  REWIND_RETURN_IF_ERROR(im.MakeRoom(room.bytes, room.pages));
  // Everything is validated and room is made: from here on the plans cannot fail.
  std::vector<memory::AppendPlan> plans;
  plans.reserve(items.size());
  std::vector<model::BatchSeq> batch(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    auto plan = im.mm->PlanAppend(items[i].seq, items[i].tokens);
    REWIND_CHECK_MSG(plan.ok(), "append plan failed after making room: %s", plan.error().message.c_str());
    im.mm->Commit(*plan);
    im.Exec(plan->ops);
    im.NoteTaken(plan->take);
    plans.push_back(std::move(plan).value());
    const memory::AppendPlan& p = plans.back();
    batch[i].state_in = p.state_in;
    batch[i].state_out = p.state_out;
    batch[i].pages = im.mm->sequence(p.seq).pages;  // stable: no other plan of this batch touches it
    batch[i].pos0 = p.pos0;
    batch[i].tokens = items[i].tokens;
    batch[i].all_logits = items[i].all_logits;
    batch[i].no_logits = items[i].no_logits;
    batch[i].images = items[i].images;
    if (auto pd = im.pending.find(p.state_in); pd != im.pending.end()) {
      if (pd->second > Impl::kMaxFusedRows) {
        im.Materialize(p.state_in);
      } else {
        batch[i].prefix = &im.logs.at(p.state_in);
        batch[i].prefix_rows = pd->second;
        ++im.counters.fused_replays;
      }
    }
  }
  model::ReplayLog replay;
  replay.seqs.resize(items.size());
  const size_t replay_per_token = im.model->ReplayBytesPerToken() / sizeof(float);
  for (size_t i = 0; i < items.size(); ++i)
    replay.seqs[i].rows = im.TakeRows(replay_per_token * (items[i].tokens.size() + size_t(batch[i].prefix_rows)));
  model::ForwardOptions opts;
  opts.replay = &replay;
  opts.hidden_all = hidden_all;
  opts.top_k = top_k;
  Status st = im.model->Forward(batch, *im.kv, *im.states, out, opts);
  REWIND_CHECK_MSG(st.ok(), "forward failed on a validated batch: %s", st.error().message.c_str());
  for (size_t i = 0; i < items.size(); ++i) {
    const memory::AppendPlan& p = plans[i];
    // With a fused rollback, state_in's bytes are still `fused` rows before this batch, and the forward's log
    // starts with those rows (BatchSeq::prefix).
    model::ReplaySeqLog log = std::move(replay.seqs[i]);
    const int32_t fused = batch[i].prefix_rows;
    im.ForgetSlot(p.state_out);
    im.ForgetSlot(p.state_in);
    if (p.state_in != p.state_out) {
      im.logs[p.state_in] = std::move(log);
      if (fused > 0) im.log_offset[p.state_in] = fused;
    } else {
      im.RecycleRows(std::move(log.rows));
    }
    im.counters.evaluated_tokens += p.tokens.size();
  }
  for (const EvalItem& it : items) {
    auto pl = im.planned.find(it.seq);
    if (pl == im.planned.end()) continue;
    const int32_t pos = Position(it.seq);
    bool hit = std::binary_search(pl->second.begin(), pl->second.end(), pos);
    pl->second.erase(pl->second.begin(), std::upper_bound(pl->second.begin(), pl->second.end(), pos));
    if (hit) im.Checkpoint(it.seq);
  }
  return Status::Ok();
}

Expected<TruncateResult> HybridCache::Truncate(SeqId seq, int32_t n) {
  Impl& im = *impl_;
  REWIND_ASSIGN_OR_RETURN(memory::TruncatePlan plan, im.mm->PlanTruncate(seq, n));
  im.mm->Commit(plan);
  im.Exec(plan.ops);
  ++im.counters.truncates;
  TruncateResult r;
  r.resume_pos = plan.state.pos;
  r.refeed = plan.refeed;
  r.source = memory::StateSourceName(plan.state.source);
  return r;
}

int32_t HybridCache::Position(SeqId seq) const { return impl_->mm->sequence(seq).pos(); }

std::shared_ptr<const PersistTicket> HybridCache::Release(SeqId seq, bool insert, std::span<const int32_t> branch) {
  Impl& im = *impl_;
  insert = insert && im.cfg.use_cache;
  im.mm->DropReservation(seq);  // the request is over: its final checkpoint is cache like any other
  if (insert && Position(seq) > 0) im.Checkpoint(seq);  // the final state: the next turn appends to it
  auto plan = im.mm->PlanRelease(seq, insert);
  REWIND_CHECK_MSG(plan.ok(), "release of sequence %d: %s", seq, plan.ok() ? "" : plan.error().message.c_str());
  const memory::Sequence& s = im.mm->sequence(seq);
  std::vector<int32_t> tokens;
  if (insert && (im.store || im.remote)) tokens = s.tokens;
  im.ForgetSlot(s.live);  // both slots are freed: a pending lazy rollback is dropped with them
  if (s.spare != memory::kNone) im.ForgetSlot(s.spare);
  im.mm->Commit(*plan);
  im.Exec(plan->ops);
  im.planned.erase(seq);
  // Copies into the disk and remote writers' queues, before any page is reused.
  std::shared_ptr<const PersistTicket> ticket = im.PersistPath(tokens, branch);
  im.ReturnFreePages();
  return ticket;
}

}  // namespace rw::engine
