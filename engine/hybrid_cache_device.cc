// The KV page pool in a device's memory: engine/hybrid_cache_impl.h (DevicePagePool).
#include <algorithm>
#include <climits>
#include <string>

#include "engine/hybrid_cache_impl.h"
#include "kernels/kv_quant.h"

namespace rw::engine {

Expected<int32_t> DevicePagePool(const model::Model& model, const memory::MemoryConfig& m, kernels::KvTypes kv_type,
                                 int64_t want_bytes, int64_t reserved_bytes, int64_t forward_bytes,
                                 int32_t n_seq_max, int32_t n_ctx) {
  const model::ModelConfig& mc = model.config();
  const int64_t total = static_cast<int64_t>(model.device_memory_total());
  const int64_t used = static_cast<int64_t>(model.device_bytes());
  const int64_t states = static_cast<int64_t>(m.max_slots) * m.state_bytes;
  // Kept for the forwards: what one holds at most (activations, output rows, replay logs), and at least an
  // eighth of the device (the driver's own, fragmentation).
  const int64_t kept = std::max(total / 8, forward_bytes);
  const int64_t room = total - used - kept - states - reserved_bytes;
  const int64_t width = static_cast<int64_t>(mc.n_head_kv) * mc.head_dim;
  const int64_t layer_page = static_cast<int64_t>(m.page_tokens) *
                             static_cast<int64_t>(std::max(kernels::KvRowBytes(kv_type.k, width),
                                                           kernels::KvRowBytes(kv_type.v, width)));
  const int64_t page = std::max<int64_t>(1, m.page_bytes);
  int64_t limit = room / page;
  std::string why = std::to_string(used >> 20) + " MiB already held there (weights, other models), " +
                    std::to_string(states >> 20) + " MiB for " + std::to_string(m.max_slots) +
                    " recurrent states, " + (reserved_bytes > 0 ? std::to_string(reserved_bytes >> 20) +
                                             " MiB for the draft model, " : std::string()) +
                    std::to_string(kept >> 20) + " MiB kept for a forward (activations and replay logs of " +
                    "--batch-size rows, at least an eighth of the device)";
  if (mc.n_attn_layers() > 0 && layer_page > 0 &&
      static_cast<int64_t>(model.device_max_buffer_bytes()) / layer_page < limit) {
    limit = static_cast<int64_t>(model.device_max_buffer_bytes()) / layer_page;
    why = "one layer's pages in one buffer of at most " + std::to_string(model.device_max_buffer_bytes() >> 20) + " MiB";
  }
  if (limit < 2)
    return Error::Exhausted("the device " + model.device_description() + " cannot hold the cache: " + why + ", " +
                            std::to_string(m.page_bytes) + " B per KV page");
  if (want_bytes > 0) {
    const int64_t want = want_bytes / page;
    if (want < 2)
      return Error::InvalidArgument("--cache-device " + std::to_string(want_bytes >> 20) +
                                    " MiB holds fewer than two KV pages of " + std::to_string(m.page_bytes) + " B");
    if (want > limit)
      return Error::Exhausted("--cache-device " + std::to_string(want_bytes >> 20) + " MiB: the device " +
                              model.device_description() + " holds at most " +
                              std::to_string((limit * page) >> 20) + " MiB of KV pages (" + why + ")");
    return static_cast<int32_t>(std::min<int64_t>(want, INT32_MAX));
  }
  // Every running sequence at its full context, and as much again for the prefix cache.
  const int64_t per_seq = (int64_t{n_ctx} + m.page_tokens - 1) / m.page_tokens + 1;
  const int64_t want = 2 * std::max(1, n_seq_max) * per_seq;
  return static_cast<int32_t>(std::min({want, limit, int64_t{INT32_MAX}}));
}

}  // namespace rw::engine
