// What a generated model contains, per architecture: the architecture metadata keys and the ordered tensor
// list with the initialisation of each tensor (../shared/fixtures/llama-ref/README.md section 2.1). An
// architecture is one ArchSpec: qwen35 (dense), qwen35moe and qwen3next (MoE).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/writer.h"
#include "modelgen/config.h"

namespace rw::modelgen {

enum class Init {
  kNormal,  // N(mean, std^2)
  kDtBias,  // softplus^-1(dt), dt log-uniform in [1e-3, 1e-1]
  kSsmA,    // -A, A ~ U(1, 16)
  kSsmBa,   // qwen3next ssm_ba: groups of 2r rows [beta (r) | alpha (r)]; beta rows N(0, std^2), alpha rows
            // N(0, (std/2)^2) as ssm_beta / ssm_alpha of qwen35
};

struct TensorSpec {
  std::string name;
  std::vector<int64_t> ne;  // ggml order, ne[0] contiguous
  Init init = Init::kNormal;
  double mean = 0, std = 1;
  int64_t group_rows = 0;  // kSsmBa: r = value heads per key head
  bool keep_f32 = false;   // 1-D tensors, norms, ssm_conv1d, ssm_a, ssm_dt.bias, routers: always F32
  int64_t layer = -1;      // block index; -1 for global tensors
  std::string kind;        // name without "blk.N." and ".weight": "attn_v", "ffn_down", "token_embd", ...

  int64_t rows() const;  // product of ne[1..]
};

struct ArchSpec {
  const char* arch;
  // `{arch}.*` keys, in llama.cpp converter order.
  void (*write_metadata)(const ModelConfig& c, gguf::Writer* w);
  std::vector<TensorSpec> (*plan)(const ModelConfig& c);
};

// Null when no generator exists for the architecture.
const ArchSpec* FindArch(const std::string& arch);

}  // namespace rw::modelgen
