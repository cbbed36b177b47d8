// Engine configuration: data read once at the edge (rewind serve flags), validated before any allocation.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "base/expected.h"
#include "engine/engine.h"
#include "kernels/kv_quant.h"

namespace rw::engine {

struct EngineConfig {
  std::string model_path;          // GGUF file (required)
  std::string model_alias;         // name reported by /v1/models; default: file name
  int32_t n_ctx = 0;               // per-sequence context; 0 = the model's training context
  int32_t n_parallel = 4;          // sequence slots served concurrently
  int32_t n_threads = 0;           // 0 = number of cores
  int32_t n_batch = 512;           // max tokens per forward batch (prefill chunk)
  int32_t device = -1;             // -1: the CPU; N: the forward on Vulkan device N (docs/gpu.md)
  int32_t n_gpu_layers = -1;       // with a device: layers on it (-1 = all; fewer is an error for now)
  // KV cache element types as llama-server spells them (kernels/kv_quant.h): f32, f16, bf16, q8_0, q5_1, q5_0,
  // q4_1, q4_0, iq4_nl. kv_type sets both; cache_type_k / cache_type_v (-ctk / -ctv), when set, override it.
  std::string kv_type = "f16";
  std::string cache_type_k;        // "" = kv_type
  std::string cache_type_v;        // "" = kv_type
  bool cache = true;               // prefix cache across requests (false = --no-cache)
  int64_t cache_ram_mib = 0;       // byte budget of pages + checkpoints (on a GPU: checkpoints); 0 = derived
  int64_t cache_device_mib = 0;    // on a GPU: the KV page pool in device memory; 0 = derived (docs/gpu.md)
  std::string cache_dir;           // disk tier + persistence ("" = off)
  int64_t cache_disk_mib = 4096;   // disk tier bound
  std::string remote_cache;        // remote tier shared by replicas: redis[s]://HOST:PORT[/DB] ("" = off)
  int64_t remote_cache_ttl_s = 0;  // expiry of values written there (0 = none: Redis' maxmemory policy evicts)
  int64_t remote_cache_wait_ms = 1000;  // wait for a state another replica announced (0 = never wait)
  // Values in Redis are authenticated (HMAC-SHA256) with this key, given inline or as a file (docs/replicas.md);
  // without one the tier runs only with remote_cache_trust (anyone who can write to Redis can then plant cache
  // entries every replica serves).
  std::string remote_cache_key;
  std::string remote_cache_key_file;
  bool remote_cache_trust = false;
  int64_t remote_cache_max_fetch_mib = 1024;  // bytes one lookup may read from Redis
  // TLS (rediss:// only): the CA certificates that verify the servers ("" = the system's store) and a client
  // certificate with its key for servers that require one ("" = none).
  std::string remote_cache_tls_ca;
  std::string remote_cache_tls_cert;
  std::string remote_cache_tls_key;
  int32_t checkpoint_every = 1024; // checkpoint every N tokens inside long messages (0 = off)
  std::string slot_save_path;      // directory for /slots save|restore ("" = cache_dir or refuse)
  bool lazy_rollback = true;       // replay-log rollbacks fused into the next forward (false = --no-lazy-rollback)
  // Decode rows sampled from the forward's best K (logit, id) pairs where every row of the batch allows it
  // (Sampler::CandidatesNeeded, no logprobs): same tokens, 8·K bytes per row from a GPU instead of the row
  // (false = --no-sample-top-k: always full rows; docs/api.md, "Sampling").
  bool sample_top_k = true;
  // Speculative decoding.
  std::string spec;                // "", "mtp", "draft", "ngram", or comma-combined
  std::string model_draft;         // draft model GGUF for --spec draft
  int32_t draft_max = 8;
  int32_t draft_min = 0;
  int32_t draft_vocab = 32768;     // MTP drafts among token ids [0, N) only (0 = the whole vocabulary)
  // Benchmark only: accept each drafted token with this probability instead of verifying it (-1 = off). The
  // output is then NOT the model's output; responses and logs say so.
  double spec_synth_accept = -1.0;

  Status Validate() const;
  // The K and V types (input errors name the flag).
  Expected<kernels::KvTypes> CacheTypes() const;
  // The remote tier's MAC key: remote_cache_key, or the contents of remote_cache_key_file (one trailing newline
  // removed); "" when neither is given. kInvalidArgument when the file cannot be read or the key is too short.
  Expected<std::string> RemoteCacheKey() const;
  static constexpr size_t kMinRemoteCacheKeyBytes = 16;
};

// Loads the model and starts the engine thread.
Expected<std::unique_ptr<Engine>> CreateEngine(const EngineConfig& config);

}  // namespace rw::engine
