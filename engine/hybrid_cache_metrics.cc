// HybridCache's counters: GET /cache (StatsJson) and the Prometheus lines of /metrics (MetricsText), for RAM and
// the disk and remote tiers. Everything a tier drops or refuses (a full queue, a failed delete, a value that
// fails its MAC) has a counter here.
#include "engine/hybrid_cache.h"
#include "engine/hybrid_cache_impl.h"

namespace rw::engine {

std::string HybridCache::StatsJson() const {
  const Impl& im = *impl_;
  const memory::MemoryManager& m = *im.mm;
  std::string o = "{";
  auto num = [&](const char* k, int64_t v, bool last = false) {
    o += "\"" + std::string(k) + "\":" + std::to_string(v) + (last ? "" : ",");
  };
  num("budget_bytes", m.config().budget_bytes);
  num("used_bytes", m.used_bytes());
  num("page_tokens", m.config().page_tokens);
  num("pages_total", m.pages().capacity());
  num("pages_used", m.pages().used_count());
  num("checkpoints", m.checkpoints().size());
  num("checkpoint_bytes", m.checkpoints().total_bytes());
  num("tree_nodes", m.tree().node_count() - 1);
  num("sequences", static_cast<int64_t>(m.sequence_ids().size()));
  num("evictions", static_cast<int64_t>(im.counters.evictions));
  num("reserved_bytes", m.HeadroomBytes());
  num("reserved_pages", m.HeadroomPages());
  num("max_sequence_tokens", m.MaxReserveTokens());
  num("disk_files_spilled", static_cast<int64_t>(im.counters.spilled));
  num("disk_files_written", static_cast<int64_t>(im.counters.persisted));
  num("disk_files_loaded", static_cast<int64_t>(im.counters.loaded));
  const memory::ContentStoreStats ds = im.store ? im.store->Stats() : memory::ContentStoreStats{};
  num("disk_bytes", ds.stored_bytes);
  num("disk_states", ds.states);
  num("disk_pages", ds.pages);
  num("disk_queued_bytes", ds.queued_bytes);
  num("disk_dropped", static_cast<int64_t>(ds.dropped_queue_full + ds.dropped_score));
  num("disk_evicted", static_cast<int64_t>(ds.evicted));
  num("disk_write_errors", static_cast<int64_t>(ds.write_errors));
  num("disk_delete_errors", static_cast<int64_t>(ds.delete_errors));
  num("disk_durable", static_cast<int64_t>(ds.durable_count));
  num("disk_durable_ms_avg",
      ds.durable_count ? static_cast<int64_t>(ds.durable_seconds_sum * 1e3 / static_cast<double>(ds.durable_count)) : 0);
  num("disk_durable_ms_max", static_cast<int64_t>(ds.durable_seconds_max * 1e3));
  num("disk_visible_ms_avg",
      ds.durable_count ? static_cast<int64_t>(ds.visible_seconds_sum * 1e3 / static_cast<double>(ds.durable_count)) : 0);
  num("disk_visible_ms_max", static_cast<int64_t>(ds.visible_seconds_max * 1e3));
  num("disk_undeleted_bytes", ds.undeleted_bytes);
  num("disk_enqueue_ms", static_cast<int64_t>(im.counters.disk_enqueue_seconds * 1e3));
  num("disk_loaded", static_cast<int64_t>(im.counters.disk_loaded));
  num("disk_reads_on_engine_thread", static_cast<int64_t>(im.counters.disk_reads_on_engine));
  num("disk_read_ms", static_cast<int64_t>(im.counters.disk_read_seconds * 1e3));

  const remote::RemoteStats rs = im.remote ? im.remote->Stats() : remote::RemoteStats{};
  num("remote_enabled", im.remote ? 1 : 0);
  num("remote_hits", static_cast<int64_t>(rs.hits));
  num("remote_misses", static_cast<int64_t>(rs.misses));
  num("remote_errors", static_cast<int64_t>(rs.errors));
  num("remote_loaded", static_cast<int64_t>(im.counters.remote_loaded));
  num("remote_fetched_bytes", static_cast<int64_t>(rs.fetched_bytes));
  num("remote_written", static_cast<int64_t>(rs.written));
  num("remote_written_bytes", static_cast<int64_t>(rs.written_bytes));
  num("remote_unauthenticated", static_cast<int64_t>(rs.unauthenticated));
  num("remote_oversized", static_cast<int64_t>(rs.oversized));
  num("remote_redirects_refused", static_cast<int64_t>(rs.redirects_refused));
  num("remote_tls_failures", static_cast<int64_t>(rs.tls_failures));
  num("remote_queued_bytes", rs.queued_bytes, true);
  return o + "}";
}

std::string HybridCache::MetricsText() const {
  const Impl& im = *impl_;
  const memory::MemoryManager& m = *im.mm;
  std::string o;
  auto metric = [&](const char* name, const char* type, const char* help, int64_t v) {
    o += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + " " +
         std::to_string(v) + "\n";
  };
  metric("rewind_cache_budget_bytes", "gauge", "Byte budget of pages and checkpoints.", m.config().budget_bytes);
  metric("rewind_cache_used_bytes", "gauge", "Bytes of live pages and checkpoints.", m.used_bytes());
  metric("rewind_cache_checkpoints", "gauge", "Checkpoints in RAM.", m.checkpoints().size());
  metric("rewind_cache_checkpoint_bytes", "gauge", "Bytes of the checkpoints in RAM (host memory, also on a GPU).",
         m.checkpoints().total_bytes());
  metric("rewind_cache_tree_nodes", "gauge", "Prefix-tree nodes.", m.tree().node_count() - 1);
  metric("rewind_cache_evictions_total", "counter", "Tree entries evicted.", im.counters.evictions);
  metric("rewind_cache_evicted_bytes_total", "counter", "Bytes freed by eviction.", im.counters.evicted_bytes);
  metric("rewind_cache_reserved_bytes", "gauge",
         "Budget held back for the growth of running requests (reserved, not yet allocated).", m.HeadroomBytes());
  metric("rewind_cache_reserved_pages", "gauge",
         "KV pages held back for the growth of running requests (on a GPU, in the device's page pool).",
         m.HeadroomPages());
  metric("rewind_cache_spilled_total", "counter", "Evicted checkpoints written to the disk tier.",
         im.counters.spilled);
  metric("rewind_cache_checkpoints_saved_total", "counter", "Checkpoints snapshotted.", im.counters.checkpoints_saved);
  metric("rewind_cache_restores_total", "counter", "States restored from checkpoints.", im.counters.restores);
  metric("rewind_cache_replays_total", "counter", "States rebuilt from the replay log.", im.counters.replays);
  metric("rewind_cache_page_copies_total", "counter", "Copy-on-write page copies.", im.counters.page_copies);
  metric("rewind_cache_truncates_total", "counter", "Rollbacks.", im.counters.truncates);
  if (im.store) {
    const memory::ContentStoreStats ds = im.store->Stats();
    metric("rewind_cache_disk_bytes", "gauge",
           "Bytes in the disk tier's folder: values, index and values whose delete failed (<= --cache-disk).",
           ds.stored_bytes + ds.index_bytes + ds.undeleted_bytes);
    metric("rewind_cache_disk_written_total", "counter", "Checkpoints written to the disk tier.", ds.written);
    metric("rewind_cache_disk_evicted_total", "counter", "Disk-tier states evicted to keep --cache-disk.", ds.evicted);
    metric("rewind_cache_disk_dropped_total", "counter",
           "Checkpoints the disk tier did not keep: its queue was full, the checkpoint scored lower than all it "
           "holds, or no room could be freed.",
           ds.dropped_queue_full + ds.dropped_score + ds.dropped_no_room);
    metric("rewind_cache_disk_dropped_queue_full_total", "counter",
           "Of those, not queued: the disk writer's queue was full.", ds.dropped_queue_full);
    metric("rewind_cache_disk_write_errors_total", "counter", "Disk-tier writes that failed (disk full, I/O error).",
           ds.write_errors);
    metric("rewind_cache_disk_delete_errors_total", "counter",
           "Disk-tier deletes that failed (retried; their bytes stay counted against --cache-disk).", ds.delete_errors);
    metric("rewind_cache_disk_durable_total", "counter",
           "Finished responses' end states made durable (written, synced and named by a synced index).",
           ds.durable_count);
    metric("rewind_cache_disk_durable_microseconds_total", "counter",
           "Sum of the times from a response's end to its end state being durable.",
           static_cast<int64_t>(ds.durable_seconds_sum * 1e6));
    metric("rewind_cache_disk_durable_max_microseconds", "gauge",
           "The longest time from a response's end to its end state being durable.",
           static_cast<int64_t>(ds.durable_seconds_max * 1e6));
    metric("rewind_cache_disk_visible_microseconds_total", "counter",
           "Sum of the times from a response's end to its end state being named by an index a restart after a "
           "process crash (kill -9) reads (before the sync).",
           static_cast<int64_t>(ds.visible_seconds_sum * 1e6));
    metric("rewind_cache_disk_visible_max_microseconds", "gauge",
           "The longest time from a response's end to its end state surviving a process crash.",
           static_cast<int64_t>(ds.visible_seconds_max * 1e6));
    metric("rewind_cache_disk_undeleted_bytes", "gauge", "Bytes of evicted values whose delete has not succeeded yet.",
           ds.undeleted_bytes);
    metric("rewind_cache_disk_loaded_total", "counter", "Disk-tier checkpoints a request resumed from.",
           im.counters.disk_loaded);
    metric("rewind_cache_disk_reads_on_engine_thread_total", "counter",
           "Of those, read on the engine thread (stalling every stream; reads happen on the request's thread).",
           im.counters.disk_reads_on_engine);
    metric("rewind_cache_disk_read_microseconds_total", "counter",
           "Time spent reading them (index, files, checks), off the engine thread.",
           static_cast<int64_t>(im.counters.disk_read_seconds * 1e6));
  }
  if (im.remote) {
    const remote::RemoteStats rs = im.remote->Stats();
    metric("rewind_remote_lookups_total", "counter", "Remote-tier lookups.", rs.lookups);
    metric("rewind_remote_hits_total", "counter", "Remote-tier lookups that found a checkpoint.", rs.hits);
    metric("rewind_remote_misses_total", "counter", "Remote-tier lookups that found none.", rs.misses);
    metric("rewind_remote_errors_total", "counter", "Remote-tier lookups that failed (Redis down, slow, refused).",
           rs.errors);
    metric("rewind_remote_corrupt_total", "counter", "Remote values that failed their check (deleted).", rs.corrupt);
    metric("rewind_remote_loaded_total", "counter", "Fetched checkpoints a request resumed from.",
           im.counters.remote_loaded);
    metric("rewind_remote_fetched_bytes_total", "counter", "Bytes read from the remote tier.", rs.fetched_bytes);
    metric("rewind_remote_fetch_microseconds_total", "counter", "Time spent in remote-tier lookups.",
           static_cast<int64_t>(rs.fetch_seconds * 1e6));
    metric("rewind_remote_written_total", "counter", "Checkpoints written to the remote tier.", rs.written);
    metric("rewind_remote_written_bytes_total", "counter", "Bytes written to the remote tier.", rs.written_bytes);
    metric("rewind_remote_write_errors_total", "counter", "Checkpoints the remote tier did not take.",
           rs.write_errors);
    metric("rewind_remote_dropped_total", "counter", "Checkpoints not queued (the writer's queue was full).",
           rs.dropped);
    metric("rewind_remote_announced_total", "counter", "States announced to other replicas at a request's start.",
           rs.announced);
    metric("rewind_remote_waits_total", "counter", "Lookups that waited for a state another replica announced.",
           rs.waits);
    metric("rewind_remote_waits_served_total", "counter", "Waits that ended with the announced state.",
           rs.waits_served);
    metric("rewind_remote_unauthenticated_total", "counter",
           "Remote values and announcements whose MAC failed (planted or changed without the key; rejected, "
           "values deleted).",
           rs.unauthenticated);
    metric("rewind_remote_oversized_total", "counter",
           "Remote values larger than this cache expects (rejected without being read whole, deleted).", rs.oversized);
    metric("rewind_remote_capped_total", "counter",
           "Remote checkpoints not fetched: more than --remote-cache-max-fetch.", rs.capped);
    metric("rewind_remote_redirects_refused_total", "counter",
           "Cluster redirects to a node outside the cluster's slot map (not followed).", rs.redirects_refused);
    metric("rewind_remote_tls_failures_total", "counter",
           "TLS handshakes with Redis that failed (the server's certificate did not verify, the server refused this "
           "client) and TLS errors on open connections.",
           rs.tls_failures);
  }
  return o;
}

}  // namespace rw::engine
