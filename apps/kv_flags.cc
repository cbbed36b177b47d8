#include "apps/kv_flags.h"

#include "kernels/kv_quant.h"

namespace rw::apps {

void AddKvTypeFlags(FlagSet& flags, engine::EngineConfig* config) {
  flags.Add("kv-type", 0, &config->kv_type, "attention KV cache type of K and V: " + kernels::KvTypeList());
  flags.Add("cache-type-k", 0, &config->cache_type_k, "KV cache type of K (as --kv-type; none: --kv-type)");
  flags.Add("cache-type-v", 0, &config->cache_type_v, "KV cache type of V (as --kv-type; none: --kv-type)");
  flags.Alias("-ctk", "cache-type-k");
  flags.Alias("-ctv", "cache-type-v");
}

}  // namespace rw::apps
