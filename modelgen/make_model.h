// Deterministic random-weight model files (`rewind make-model`): metadata and tensor names exactly as
// llama.cpp v0.5.0 expects, tokenizer copied from a vocab GGUF, weights scaled as the fixtures README 2.1
// describes, tensors streamed to disk one chunk of rows at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/expected.h"
#include "gguf/gguf.h"
#include "gguf/writer.h"
#include "modelgen/config.h"
#include "modelgen/file_type.h"
#include "modelgen/tensor_plan.h"

namespace rw::modelgen {

struct MakeModelOptions {
  std::string preset = "tiny";
  std::string file_type = "f32";
  uint64_t seed = 0;  // 0: the preset's default seed
  int threads = 0;    // 0: all hardware threads (at most 16); the output does not depend on it
  std::string name;   // general.name; empty: the preset's
  int64_t n_ctx_train = 0;  // the context_length written; 0: the preset's
  // Called before each tensor is generated (index, count, tensor).
  std::function<void(size_t, size_t, const TensorSpec&)> progress;
};

// A model ready to write: the writer holds the metadata and the declared tensors.
struct ModelPlan {
  ModelConfig config;
  FileType file_type{};
  uint64_t seed = 0;
  std::vector<TensorSpec> tensors;
  std::vector<gguf::TensorType> types;  // [tensor]
};

// Number of tokens of a vocab file (tokenizer.ggml.tokens).
Expected<int64_t> VocabSize(const gguf::File& vocab);
// Copies every tokenizer.* key of `vocab`, in file order.
Status CopyTokenizer(const gguf::File& vocab, gguf::Writer* w);

// Fills `w` (metadata + tensor declarations) without writing anything.
Expected<ModelPlan> PlanModel(const MakeModelOptions& opt, const gguf::File& vocab, gguf::Writer* w);
// Generates and writes the tensor data of an opened writer, then closes it.
Status WriteModelData(const ModelPlan& plan, int threads, gguf::Writer* w,
                      const std::function<void(size_t, size_t, const TensorSpec&)>& progress = {});
// PlanModel + Open(out_path) + WriteModelData. The file appears atomically.
Status MakeModel(const MakeModelOptions& opt, const gguf::File& vocab, const std::string& out_path);

// A vocab-only GGUF (no tensors): general.architecture, general.type = "vocab", general.name and every
// tokenizer.* key of `model`.
Status ExtractVocab(const gguf::File& model, const std::string& out_path);

}  // namespace rw::modelgen
