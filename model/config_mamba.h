// Internal to model/: metadata readers shared by config.cc, config_mamba.cc and config_lfm2.cc, and the readers
// of the Mamba-2 hybrids (nemotron_h, granitehybrid) and LFM2.
#pragma once

#include <string>
#include <vector>

#include "base/expected.h"
#include "gguf/gguf.h"
#include "model/config.h"

namespace rw::model::internal {

std::string Key(const std::string& arch, const char* k);
Expected<int32_t> ReqU32(const gguf::File& f, const std::string& key);
Expected<int32_t> OptU32(const gguf::File& f, const std::string& key, int32_t def);
Expected<float> OptF32(const gguf::File& f, const std::string& key, float def);
// A per-layer count: a UINT32 for every layer or an INT32/UINT32 array of block_count values; absent: all 0.
Expected<std::vector<int32_t>> PerLayer(const gguf::File& f, const std::string& key, int32_t n_layer_all);
// A UINT32 broadcast to all layers or an array of block_count values whose non-zero entries agree.
Expected<int32_t> OptU32OrArr(const gguf::File& f, const std::string& key, int32_t def, int32_t n_layer_all);

// context_length, embedding_length, block_count (all trunk layers: n_layer = n_layer_all) and the RMS eps.
Status ReadTrunkBasics(const gguf::File& f, ModelConfig* c);

// expert_gating_func must be 2 (sigmoid) and expert_group_count at most 1 (lfm2moe, kimi-linear).
Status RequireSigmoidRouter(const gguf::File& f, const std::string& arch);

// c->head_dim from attention.key_length (absent: def, or an error when def <= 0), and attention.value_length
// (absent: the same) checked equal to it.
Status ReadHeadDim(const gguf::File& f, const std::string& arch, int32_t def, ModelConfig* c);

// Everything after general.architecture / general.name for a Mamba-2 hybrid (c->arch already set), as
// llama.cpp v0.5.0 reads it. nemotron_h: a layer is Mamba-2 iff its attention.head_count_kv and
// feed_forward_length are both 0, attention iff only feed_forward_length is 0, otherwise an MLP.
// granitehybrid: Mamba-2 iff attention.head_count_kv is 0, else attention; every block also has a SwiGLU FFN,
// dense or (expert_count > 0) a softmax-routed MoE with an optional shared expert.
Status ReadMamba2Hybrid(const gguf::File& f, ModelConfig* c);

// Everything after general.architecture / general.name for LFM2 (llama.cpp v0.5.0 llama_model_lfm2): a layer is a
// short convolution iff its attention.head_count_kv is 0, else attention (q/k norms, NeoX RoPE); every block
// has a dense SwiGLU FFN (lfm2moe: after n_layer_dense_lead blocks, a sigmoid-routed MoE) (config_lfm2.cc).
Status ReadLfm2(const gguf::File& f, ModelConfig* c);

// Everything after general.architecture / general.name for kimi-linear (llama.cpp v0.5.0
// llama_model_kimi_linear): a layer is KDA iff its attention.head_count_kv is 0, else MLA (config_kimi.cc).
Status ReadKimiLinear(const gguf::File& f, ModelConfig* c);
// The kimi-linear part of ModelConfig::Validate (config_kimi.cc).
Status ValidateKimi(const ModelConfig& c);

}  // namespace rw::model::internal
