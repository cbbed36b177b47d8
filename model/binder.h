// Binding GGUF tensors to weight structs with exact shape and type checks; shared by the trunk (weights.cc)
// and the MTP head (mtp.cc), which bind the same attention and FFN blocks.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "base/expected.h"
#include "gguf/gguf.h"
#include "model/config.h"
#include "model/weights.h"

namespace rw::model::internal {

// Tensors named prefix + name; errors say "<what> '<full name>' ...".
class TensorBinder {
 public:
  TensorBinder(const gguf::File& f, std::string prefix, std::string what)
      : f_(f), prefix_(std::move(prefix)), what_(std::move(what)) {}

  std::string Name(const std::string& n) const { return prefix_ + n; }
  const std::string& what() const { return what_; }
  bool Has(const std::string& n) const { return f_.FindTensor(Name(n)) != nullptr; }
  // Exact shape {ne0, ne1, ...}; missing dims are 1.
  Expected<const gguf::TensorInfo*> Find(const std::string& n, std::initializer_list<int64_t> shape) const;
  // A matrix used through MatMul: any supported weight type. Extra dims (experts) fold into rows.
  Expected<Matrix> Mat(const std::string& n, std::initializer_list<int64_t> shape) const;
  // A vector or small tensor used as F32 (norm weights, conv kernel, dt bias, A).
  Expected<const float*> F32(const std::string& n, std::initializer_list<int64_t> shape) const;

 private:
  const gguf::File& f_;
  std::string prefix_, what_;
};

// The gated attention and the FFN (dense or MoE) of one block, from a binder whose prefix is the block's.
Status BindAttention(const TensorBinder& b, const ModelConfig& c, AttnWeights* a);
Status BindFfn(const TensorBinder& b, const ModelConfig& c, FfnWeights* f);
// One block of a Mamba-2 hybrid (nemotron_h): attn_norm and its one sub-layer (nemotron_weights.cc).
Status BindMamba2HybridBlock(const TensorBinder& b, const ModelConfig& c, int32_t il, LayerWeights* L);
// One LFM2 block: attn_norm, a short convolution or an attention with q/k norms, ffn_norm and a dense SwiGLU FFN
// (lfm2_weights.cc).
Status BindLfm2Block(const TensorBinder& b, const ModelConfig& c, int32_t il, LayerWeights* L);
// One kimi-linear block: attn_norm, KDA or MLA, ffn_norm, a dense SwiGLU FFN or the MoE (kimi_weights.cc).
Status BindKimiBlock(const TensorBinder& b, const ModelConfig& c, int32_t il, LayerWeights* L);

}  // namespace rw::model::internal
