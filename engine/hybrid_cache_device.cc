// Device memory for the cache's pages and states: engine/hybrid_cache_impl.h (DevicePageLimit).
#include <algorithm>
#include <climits>
#include <string>

#include "engine/hybrid_cache_impl.h"
#include "kernels/kv_quant.h"

namespace rw::engine {

Expected<int32_t> DevicePageLimit(const model::Model& model, const memory::MemoryConfig& m, kernels::KvTypes kv_type) {
  if (model.device_name() == "cpu") return INT32_MAX;
  const model::ModelConfig& mc = model.config();
  const int64_t total = static_cast<int64_t>(model.device_memory_total());
  const int64_t used = static_cast<int64_t>(model.device_bytes());
  const int64_t states = static_cast<int64_t>(m.max_slots) * m.state_bytes;
  const int64_t room = total - used - total / 8 - states;
  const int64_t width = static_cast<int64_t>(mc.n_head_kv) * mc.head_dim;
  const int64_t layer_page = static_cast<int64_t>(m.page_tokens) *
                             static_cast<int64_t>(std::max(kernels::KvRowBytes(kv_type.k, width),
                                                           kernels::KvRowBytes(kv_type.v, width)));
  int64_t pages = room / std::max<int64_t>(1, m.page_bytes);
  if (mc.n_attn_layers() > 0 && layer_page > 0)
    pages = std::min<int64_t>(pages, static_cast<int64_t>(model.device_max_buffer_bytes()) / layer_page);
  if (pages < 2)
    return Error::Exhausted("the device " + model.device_description() + " cannot hold the cache: " +
                            std::to_string(used >> 20) + " MiB already held there (weights, other models), " +
                            std::to_string(states >> 20) + " MiB for " + std::to_string(m.max_slots) +
                            " recurrent states, " + std::to_string(m.page_bytes) +
                            " B per KV page, an eighth kept for activations");
  return static_cast<int32_t>(std::min<int64_t>(pages, INT32_MAX));
}

}  // namespace rw::engine
