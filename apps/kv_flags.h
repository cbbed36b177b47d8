// The KV cache type flags shared by serve, run and bench, spelled as llama-server spells them:
// --kv-type (K and V), -ctk/--cache-type-k, -ctv/--cache-type-v (kernels/kv_quant.h lists the types).
#pragma once

#include "base/flags.h"
#include "engine/engine_config.h"

namespace rw::apps {

// Binds the flags to config->kv_type / cache_type_k / cache_type_v; config->CacheTypes() resolves them.
void AddKvTypeFlags(FlagSet& flags, engine::EngineConfig* config);

}  // namespace rw::apps
