#include "engine/engine_config.h"

#include <unistd.h>

#include <set>
#include <sstream>

#include "base/file.h"
#include "remote/redis_client.h"

namespace rw::engine {

Expected<kernels::KvTypes> EngineConfig::CacheTypes() const {
  auto parse = [](const std::string& flag, const std::string& name) -> Expected<kernels::KvType> {
    auto t = kernels::ParseKvType(name);
    if (!t.ok()) return Error::InvalidArgument(flag + ": " + t.error().message);
    return t;
  };
  REWIND_ASSIGN_OR_RETURN(kernels::KvType both, parse("--kv-type", kv_type));
  kernels::KvTypes types(both);
  if (!cache_type_k.empty()) {
    REWIND_ASSIGN_OR_RETURN(types.k, parse("--cache-type-k", cache_type_k));
  }
  if (!cache_type_v.empty()) {
    REWIND_ASSIGN_OR_RETURN(types.v, parse("--cache-type-v", cache_type_v));
  }
  return types;
}

Expected<std::string> EngineConfig::RemoteCacheKey() const {
  if (remote_cache_key_file.empty()) return remote_cache_key;
  auto bytes = ReadFileToString(remote_cache_key_file);
  if (!bytes.ok())
    return Error::InvalidArgument("--remote-cache-key-file: cannot read " + remote_cache_key_file + ": " +
                                  bytes.error().message);
  std::string key = std::move(bytes).value();
  while (!key.empty() && (key.back() == '\n' || key.back() == '\r')) key.pop_back();  // one trailing newline
  if (key.size() < kMinRemoteCacheKeyBytes)
    return Error::InvalidArgument("--remote-cache-key-file: the key in " + remote_cache_key_file +
                                  " must be at least " + std::to_string(kMinRemoteCacheKeyBytes) + " bytes");
  return key;
}

Status EngineConfig::Validate() const {
  if (model_path.empty()) return Error::InvalidArgument("no model given (-m FILE)");
  if (n_ctx < 0) return Error::InvalidArgument("-c/--ctx-size must be >= 0, got " + std::to_string(n_ctx));
  if (n_parallel < 1 || n_parallel > 256)
    return Error::InvalidArgument("--parallel must be in [1, 256], got " + std::to_string(n_parallel));
  if (n_threads < 0 || n_threads > 1024)
    return Error::InvalidArgument("--threads must be in [0, 1024], got " + std::to_string(n_threads));
  if (n_batch < 1) return Error::InvalidArgument("--batch-size must be >= 1, got " + std::to_string(n_batch));
  REWIND_RETURN_IF_ERROR(CacheTypes());
  if (cache_ram_mib < 0) return Error::InvalidArgument("--cache-ram must be >= 0");
  if (cache_device_mib < 0) return Error::InvalidArgument("--cache-device must be >= 0");
  if (cache_disk_mib < 0) return Error::InvalidArgument("--cache-disk must be >= 0");
  if (remote_cache_ttl_s < 0) return Error::InvalidArgument("--remote-cache-ttl must be >= 0");
  if (remote_cache_wait_ms < 0 || remote_cache_wait_ms > 600'000)
    return Error::InvalidArgument("--remote-cache-wait must be between 0 and 600000 ms");
  if (remote_cache_max_fetch_mib < 1) return Error::InvalidArgument("--remote-cache-max-fetch must be >= 1 (MiB)");
  if (!remote_cache_key.empty() && !remote_cache_key_file.empty())
    return Error::InvalidArgument("give --remote-cache-key or --remote-cache-key-file, not both");
  if (!remote_cache.empty()) {
    auto url = remote::ParseRedisUrl(remote_cache);
    if (!url.ok()) return url.error();
    const std::pair<const char*, const std::string*> tls_files[] = {{"--remote-cache-tls-ca", &remote_cache_tls_ca},
                                                                    {"--remote-cache-tls-cert", &remote_cache_tls_cert},
                                                                    {"--remote-cache-tls-key", &remote_cache_tls_key}};
    for (const auto& [flag, file] : tls_files) {
      if (file->empty()) continue;
      if (!url->tls)
        return Error::InvalidArgument(std::string(flag) + " needs a rediss:// (TLS) --remote-cache URL, got " +
                                      url->ToString());
      if (access(file->c_str(), R_OK) != 0)
        return Error::InvalidArgument(std::string(flag) + ": cannot read " + *file);
    }
    if (remote_cache_tls_cert.empty() != remote_cache_tls_key.empty())
      return Error::InvalidArgument("--remote-cache-tls-cert and --remote-cache-tls-key go together");
    const bool keyed = !remote_cache_key.empty() || !remote_cache_key_file.empty();
    if (keyed && remote_cache_trust)
      return Error::InvalidArgument(
          "--remote-cache-trust contradicts --remote-cache-key/--remote-cache-key-file: with a key every value is "
          "authenticated");
    if (!keyed && !remote_cache_trust)
      return Error::InvalidArgument(
          "--remote-cache needs a key to authenticate what replicas share (--remote-cache-key-file FILE or "
          "--remote-cache-key KEY, the same on every replica), or --remote-cache-trust to accept unauthenticated "
          "values from anyone who can write to that Redis (docs/replicas.md)");
    if (!remote_cache_key.empty() && remote_cache_key.size() < kMinRemoteCacheKeyBytes)
      return Error::InvalidArgument("--remote-cache-key must be at least " +
                                    std::to_string(kMinRemoteCacheKeyBytes) + " bytes");
  }
  if (checkpoint_every < 0) return Error::InvalidArgument("--checkpoint-every must be >= 0");
  if (draft_max < 0 || draft_max > 64) return Error::InvalidArgument("--draft-max must be in [0, 64]");
  if (draft_vocab < 0) return Error::InvalidArgument("--draft-vocab must be >= 0");
  if (draft_min < 0 || draft_min > draft_max) return Error::InvalidArgument("--draft-min must be in [0, draft-max]");
  if (spec_synth_accept > 1.0) return Error::InvalidArgument("--spec-synth-accept must be <= 1");
  if (device >= 0 && spec.find("mtp") != std::string::npos)
    return Error::InvalidArgument("--spec mtp is not supported on the GPU yet (the MTP head needs hidden rows): "
                                  "use --spec draft or ngram, or --device cpu");
  if (!spec.empty()) {
    std::stringstream ss(spec);
    std::string item;
    while (std::getline(ss, item, ',')) {
      if (item != "mtp" && item != "draft" && item != "ngram")
        return Error::InvalidArgument("--spec: unknown drafter '" + item + "' (expected mtp, draft, ngram)");
      if (item == "draft" && model_draft.empty())
        return Error::InvalidArgument("--spec draft needs --model-draft FILE");
    }
  }
  return Status::Ok();
}

}  // namespace rw::engine
