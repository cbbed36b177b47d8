// HybridCache's remote tier (docs/replicas.md): checkpoints shared by replicas through Redis
// (remote/remote_store.h). Writes ride on the disk tier's path (PersistCheckpoint queues a copy for each
// tier); lookups happen on the request's thread (FetchRemote) and what they bring is imported on the engine
// thread by Acquire, which only copies memory.
#include <algorithm>

#include "base/log.h"
#include "engine/hybrid_cache.h"
#include "engine/hybrid_cache_impl.h"
#include "memory/placement.h"
#include "memory/store_format.h"

namespace rw::engine {

void HybridCache::Impl::OpenRemote() {
  auto url = remote::ParseRedisUrl(cfg.remote_url);
  if (!url.ok()) {
    LOG_WARN("cache: remote tier off: %s", url.error().message.c_str());
    return;
  }
  remote::RemoteStoreConfig rc;
  rc.identity = memory::StoreIdentity(fingerprint, kv_label);
  rc.page_tokens = cfg.page_tokens;
  rc.ttl_s = cfg.remote_ttl_s;
  rc.wait_ms = cfg.remote_wait_ms;
  rc.queue_bytes = cfg.remote_queue_bytes;
  rc.mac_key = cfg.remote_mac_key;
  rc.trust = cfg.remote_trust;
  rc.max_fetch_bytes = cfg.remote_max_fetch_bytes;
  rc.tls = cfg.remote_tls;
  rc.state_bytes = static_cast<int64_t>(states->bytes_per_state());
  rc.page_bytes_per_token =
      static_cast<int64_t>((kv->k_row_bytes() + kv->v_row_bytes()) * static_cast<size_t>(kv->config().n_layers));
  auto r = remote::RemoteStore::Open(*url, rc);
  if (!r.ok()) {
    LOG_WARN("cache: remote tier off: %s", r.error().ToString().c_str());
    return;
  }
  remote = std::move(r).value();
  if (!store) disk_min_saved_tokens = MinSavedTokens();
  LOG_INFO("cache: remote tier %s (values %s, key id %s)", remote->Describe().c_str(),
           cfg.remote_mac_key.empty() ? "NOT authenticated: --remote-cache-trust" : "authenticated by HMAC-SHA256",
           memory::MacKeyId(cfg.remote_mac_key).c_str());
}

bool HybridCache::has_remote() const { return impl_->remote != nullptr; }

std::shared_ptr<const remote::RemoteFetch> HybridCache::FetchRemote(std::span<const int32_t> prompt,
                                                                    std::span<const int32_t> checkpoint_hints,
                                                                    int32_t generation_start) const {
  const Impl& im = *impl_;
  if (!im.remote || !im.cfg.use_cache || prompt.size() < 2) return nullptr;
  const int32_t n = static_cast<int32_t>(prompt.size());
  // The positions this cache checkpoints (placement from the start of the prompt), and the end of a previous
  // turn, which sits one or two tokens (the template's separator) before a message start.
  memory::PlacementInput in;
  in.prompt_size = n;
  in.message_starts = checkpoint_hints;
  in.interval = im.cfg.checkpoint_every;
  std::vector<int32_t> cands = memory::PlaceCheckpoints(in);
  for (int32_t h : checkpoint_hints)
    for (int32_t d : {0, 1, 2}) cands.push_back(h - d);
  // Deeper than what the disk tier holds (it serves those without the network); its pages from there on.
  int32_t after = 0;
  if (im.store) {
    const std::vector<int32_t> local = im.store->StatesOnPath(prompt, 0, n - 1);
    if (!local.empty()) after = local.front();
  }
  auto fetch = std::make_shared<remote::RemoteFetch>(
      im.remote->Fetch(prompt, cands, after, after / im.kv->page_size(), std::max(generation_start, 0)));
  return fetch;
}

int32_t HybridCache::Impl::ImportRemote(std::span<const int32_t> prompt, const remote::RemoteFetch& fetch) {
  if (!remote) return 0;
  auto imported = ImportFetched(prompt, fetch.end, fetch.first_page, fetch.state, fetch.pages, "remote");
  const int32_t r = imported.ok() ? *imported : 0;
  counters.remote_loaded += r > 0 ? 1 : 0;
  return r;
}

}  // namespace rw::engine
