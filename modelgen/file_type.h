// Output file types of make-model (--type) and the per-tensor type choice, approximating llama-quantize
// v0.5.0 without an importance matrix (docs/make-model.md lists the rules).
#pragma once

#include <cstdint>
#include <string>

#include "base/expected.h"
#include "gguf/types.h"
#include "modelgen/config.h"
#include "modelgen/tensor_plan.h"

namespace rw::modelgen {

struct FileType {
  const char* name;       // "q4_k_m"
  uint32_t llama_ftype;   // general.file_type (LlamaFileType)
  gguf::TensorType base;  // type of most matrices
  bool mix_m;             // *_M: attn_v / attn_qkv / ffn_down of some layers get Q6_K
};

Expected<FileType> ParseFileType(const std::string& name);
std::string FileTypeNames();
bool IsQuantized(const FileType& ft);  // not F32/F16/BF16

// Type of one tensor in a file of type `ft`.
gguf::TensorType ChooseTensorType(const FileType& ft, const TensorSpec& t, const ModelConfig& c);

}  // namespace rw::modelgen
