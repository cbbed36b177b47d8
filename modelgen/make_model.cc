// Model generation (see make_model.h).
#include "modelgen/make_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <thread>

#include "base/check.h"
#include "gguf/quants.h"
#include "modelgen/quant_blocks.h"
#include "modelgen/rng.h"

namespace rw::modelgen {
namespace {

constexpr int kMaxThreads = 16;
constexpr int64_t kChunkElements = int64_t{1} << 22;  // rows generated per write: ~16 MB of floats

void FillRow(const TensorSpec& t, uint64_t seed, int64_t row, float* dst, int64_t n) {
  Rng rng(RowSeed(seed, t.name, row));
  switch (t.init) {
    case Init::kNormal:
      for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(t.mean + t.std * rng.Normal());
      break;
    case Init::kDtBias:
      for (int64_t i = 0; i < n; ++i) {
        const double dt = std::exp(rng.Uniform(std::log(1e-3), std::log(1e-1)));
        dst[i] = static_cast<float>(std::log(std::expm1(dt)));  // softplus^-1(dt)
      }
      break;
    case Init::kSsmBa: {
      const double std = row % (2 * t.group_rows) < t.group_rows ? t.std : 0.5 * t.std;
      for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(std * rng.Normal());
      break;
    }
    case Init::kSsmA:
      for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(-rng.Uniform(1.0, 16.0));
      break;
  }
}

// Runs fn(begin, end) over [0, n) split across up to `threads` threads.
void ParallelFor(int64_t n, int threads, const std::function<void(int64_t, int64_t)>& fn) {
  const int64_t k = std::min<int64_t>(threads, n);
  if (k <= 1) {
    fn(0, n);
    return;
  }
  std::vector<std::thread> pool;
  for (int64_t j = 0; j < k; ++j) pool.emplace_back(fn, n * j / k, n * (j + 1) / k);
  for (std::thread& th : pool) th.join();
}

}  // namespace

Expected<int64_t> VocabSize(const gguf::File& vocab) {
  const gguf::Value* tokens = vocab.Find("tokenizer.ggml.tokens");
  if (!tokens || tokens->type != gguf::ValueType::kArray || tokens->elem_type != gguf::ValueType::kString) {
    return Error::InvalidArgument(vocab.path() +
                                  ": no tokenizer.ggml.tokens string array (not a vocab file?)");
  }
  if (tokens->array.empty()) return Error::InvalidArgument(vocab.path() + ": empty vocabulary");
  return static_cast<int64_t>(tokens->array.size());
}

Status CopyTokenizer(const gguf::File& vocab, gguf::Writer* w) {
  REWIND_RETURN_IF_ERROR(VocabSize(vocab));
  for (const auto& [key, value] : vocab.metadata()) {
    if (key.rfind("tokenizer.", 0) == 0) w->Set(key, value);
  }
  return Status::Ok();
}

Expected<ModelPlan> PlanModel(const MakeModelOptions& opt, const gguf::File& vocab, gguf::Writer* w) {
  ModelPlan plan;
  REWIND_ASSIGN_OR_RETURN(plan.config, FindPreset(opt.preset));
  REWIND_ASSIGN_OR_RETURN(plan.file_type, ParseFileType(opt.file_type));
  REWIND_ASSIGN_OR_RETURN(plan.config.n_vocab, VocabSize(vocab));
  if (!opt.name.empty()) plan.config.name = opt.name;
  if (opt.n_ctx_train < 0) return Error::InvalidArgument("the training context must be >= 0");
  if (opt.n_ctx_train > 0) plan.config.n_ctx_train = opt.n_ctx_train;
  REWIND_RETURN_IF_ERROR(plan.config.Validate());
  const ArchSpec* arch = FindArch(plan.config.arch);
  if (!arch) return Error::Unsupported("no generator for architecture '" + plan.config.arch + "'");
  plan.seed = opt.seed != 0 ? opt.seed : plan.config.default_seed;
  const ModelConfig& c = plan.config;

  w->SetString("general.architecture", c.arch);
  w->SetString("general.type", "model");
  w->SetString("general.name", c.name);
  w->SetString("general.description", "random-weight " + c.arch + " test model (rewind make-model, preset " +
                                          c.preset + ", seed " + std::to_string(plan.seed) + ")");
  // Key order as llama.cpp's tools leave it: the converter writes file_type after the general keys;
  // llama-quantize re-sets quantization_version and file_type, which moves them to the end.
  const bool quantized = IsQuantized(plan.file_type);
  if (!quantized) w->SetU32("general.file_type", plan.file_type.llama_ftype);
  arch->write_metadata(c, w);
  REWIND_RETURN_IF_ERROR(CopyTokenizer(vocab, w));
  if (quantized) {
    w->SetU32("general.quantization_version", 2);
    w->SetU32("general.file_type", plan.file_type.llama_ftype);
  }

  plan.tensors = arch->plan(c);
  if (IsQuantized(plan.file_type)) {
    // llama-quantize writes tensors sorted by (layer, name), global tensors first; do the same so the layout
    // matches llama.cpp-quantised files.
    std::stable_sort(plan.tensors.begin(), plan.tensors.end(), [](const TensorSpec& a, const TensorSpec& b) {
      return a.layer != b.layer ? a.layer < b.layer : a.name < b.name;
    });
  }
  for (const TensorSpec& t : plan.tensors) {
    const gguf::TensorType type = ChooseTensorType(plan.file_type, t, c);
    plan.types.push_back(type);
    REWIND_RETURN_IF_ERROR(w->AddTensor(t.name, type, t.ne));
  }
  return plan;
}

Status WriteModelData(const ModelPlan& plan, int threads, gguf::Writer* w,
                      const std::function<void(size_t, size_t, const TensorSpec&)>& progress) {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  threads = std::min(threads, kMaxThreads);
  std::vector<float> src;    // [chunk rows][ne0]
  std::vector<uint8_t> dst;  // [chunk rows][row bytes]
  for (size_t k = 0; k < plan.tensors.size(); ++k) {
    const TensorSpec& t = plan.tensors[k];
    const gguf::TensorType type = plan.types[k];
    if (progress) progress(k, plan.tensors.size(), t);
    const int64_t n = t.ne[0], rows = t.rows();
    const size_t row_bytes = gguf::RowBytes(type, n);
    const int64_t chunk_rows = std::max<int64_t>(1, kChunkElements / std::max<int64_t>(n, 1));
    for (int64_t r0 = 0; r0 < rows; r0 += chunk_rows) {
      const int64_t nr = std::min(chunk_rows, rows - r0);
      if (!DrawsQuantBlocks(type, t)) src.resize(static_cast<size_t>(nr * n));
      dst.resize(static_cast<size_t>(nr) * row_bytes);
      const bool direct = DrawsQuantBlocks(type, t);  // K-quant blocks drawn as they are (quant_blocks.h)
      ParallelFor(nr, nr * n >= (int64_t{1} << 16) ? threads : 1, [&](int64_t a, int64_t b) {
        for (int64_t r = a; r < b; ++r) {
          if (direct) {
            RandomQuantRow(type, t, plan.seed, r0 + r, dst.data() + r * row_bytes, n);
            continue;
          }
          float* row = src.data() + r * n;
          FillRow(t, plan.seed, r0 + r, row, n);
          if (type == gguf::TensorType::kF32) {
            std::memcpy(dst.data() + r * row_bytes, row, row_bytes);
          } else {
            gguf::QuantizeRow(type, row, dst.data() + r * row_bytes, n);
          }
        }
      });
      REWIND_RETURN_IF_ERROR(w->WriteTensorChunk(t.name, dst.data(), dst.size()));
    }
  }
  return w->Close();
}

Status MakeModel(const MakeModelOptions& opt, const gguf::File& vocab, const std::string& out_path) {
  gguf::Writer w;
  REWIND_ASSIGN_OR_RETURN(ModelPlan plan, PlanModel(opt, vocab, &w));
  REWIND_RETURN_IF_ERROR(w.Open(out_path));
  return WriteModelData(plan, opt.threads, &w, opt.progress);
}

Status ExtractVocab(const gguf::File& model, const std::string& out_path) {
  gguf::Writer w;
  if (const gguf::Value* arch = model.Find("general.architecture");
      arch && arch->type == gguf::ValueType::kString) {
    w.SetString("general.architecture", arch->s);
  }
  w.SetString("general.type", "vocab");
  if (const gguf::Value* name = model.Find("general.name"); name && name->type == gguf::ValueType::kString) {
    w.SetString("general.name", name->s + " vocab");
  }
  REWIND_RETURN_IF_ERROR(CopyTokenizer(model, &w));
  REWIND_RETURN_IF_ERROR(w.Open(out_path));
  return w.Close();
}

}  // namespace rw::modelgen
