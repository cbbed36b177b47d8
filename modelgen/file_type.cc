// Per-tensor type choice (see file_type.h).
#include "modelgen/file_type.h"

#include "gguf/quants.h"

namespace rw::modelgen {
namespace {

using gguf::TensorType;

// clang-format off
constexpr FileType kFileTypes[] = {
    {"f32", 0, TensorType::kF32, false},     {"f16", 1, TensorType::kF16, false},
    {"bf16", 32, TensorType::kBF16, false},  {"q8_0", 7, TensorType::kQ8_0, false},
    {"q4_0", 2, TensorType::kQ4_0, false},   {"q4_1", 3, TensorType::kQ4_1, false},
    {"q5_0", 8, TensorType::kQ5_0, false},   {"q5_1", 9, TensorType::kQ5_1, false},
    {"q4_k_s", 14, TensorType::kQ4_K, false}, {"q4_k_m", 15, TensorType::kQ4_K, true},
    {"q5_k_s", 16, TensorType::kQ5_K, false}, {"q5_k_m", 17, TensorType::kQ5_K, true},
    {"q6_k", 18, TensorType::kQ6_K, false},
};
// clang-format on

// llama-quantize's use_more_bits(i_layer, n_layers).
bool UseMoreBits(int64_t i, int64_t n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

// llama-quantize's fallback when a row is not a whole number of blocks.
TensorType Fallback(TensorType t) {
  switch (t) {
    case TensorType::kQ4_K:
      return TensorType::kQ5_0;
    case TensorType::kQ5_K:
      return TensorType::kQ5_1;
    case TensorType::kQ6_K:
      return TensorType::kQ8_0;
    default:
      return TensorType::kF16;
  }
}

}  // namespace

Expected<FileType> ParseFileType(const std::string& name) {
  for (const FileType& ft : kFileTypes) {
    if (name == ft.name) {
      if (!gguf::IsSupportedWeightType(ft.base)) {
        return Error::Unsupported("--type " + name + ": no quantiser for " + gguf::TypeName(ft.base));
      }
      return ft;
    }
  }
  return Error::InvalidArgument("unknown --type '" + name + "' (known: " + FileTypeNames() + ")");
}

std::string FileTypeNames() {
  std::string s;
  for (const FileType& ft : kFileTypes) {
    if (!s.empty()) s += ", ";
    s += ft.name;
  }
  return s;
}

bool IsQuantized(const FileType& ft) {
  return ft.base != TensorType::kF32 && ft.base != TensorType::kF16 && ft.base != TensorType::kBF16;
}

TensorType ChooseTensorType(const FileType& ft, const TensorSpec& t, const ModelConfig& c) {
  if (t.keep_f32) return TensorType::kF32;
  TensorType type = ft.base;
  if (IsQuantized(ft) && ft.base != TensorType::kQ8_0) {
    const bool output_like = t.kind == "output" || (t.kind == "token_embd" && c.tied);
    if (output_like) {
      type = TensorType::kQ6_K;
    } else if (ft.mix_m && (t.kind == "attn_v" || t.kind == "attn_qkv" || t.kind == "ffn_down") &&
               UseMoreBits(t.layer, c.n_layer_all())) {
      type = TensorType::kQ6_K;
    }
  }
  for (int guard = 0; guard < 4; ++guard) {
    if (t.ne[0] % gguf::BlockSize(type) == 0) return type;
    type = Fallback(type);
  }
  return TensorType::kF32;
}

}  // namespace rw::modelgen
