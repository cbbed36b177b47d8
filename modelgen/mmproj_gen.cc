#include "modelgen/mmproj_gen.h"

#include <cmath>
#include <bit>
#include <functional>

#include "base/hash.h"
#include "gguf/writer.h"
#include "modelgen/rng.h"

namespace rw::modelgen {

Expected<MmprojConfig> MmprojPreset(const std::string& name, int64_t n_out) {
  MmprojConfig c;
  c.preset = name;
  c.n_out = n_out;
  if (name == "tiny") {
    c.n_embd = 32;
    c.n_head = 2;
    c.n_ff = 64;
    c.n_layer = 2;
    c.pos_side = 4;
    c.weight_scale = 0.2f;
  } else if (name == "qwen35") {
    c.n_embd = 1152;
    c.n_head = 16;
    c.n_ff = 4304;
    c.n_layer = 27;
    c.pos_side = 48;
    c.f16 = true;
  } else {
    return Error::InvalidArgument("unknown mmproj preset '" + name + "' (tiny, qwen35)");
  }
  if (n_out <= 0) return Error::InvalidArgument("mmproj: the language model's embedding length is needed");
  return c;
}

std::vector<std::string> MmprojPresetNames() { return {"tiny", "qwen35"}; }

namespace {

Status Write(const MmprojConfig& c, uint64_t seed, const std::function<Status(gguf::Writer&)>& open) {
  gguf::Writer w;
  w.SetString("general.architecture", "clip");
  w.SetString("general.name", "rewind random mmproj " + c.preset);
  w.SetU32("general.file_type", c.f16 ? 1 : 0);
  w.SetBool("clip.has_vision_encoder", true);
  w.SetString("clip.projector_type", "qwen3vl_merger");
  w.SetBool("clip.use_gelu", true);
  w.SetU32("clip.vision.image_size", static_cast<uint32_t>(c.pos_side * c.patch_size));
  w.SetU32("clip.vision.patch_size", static_cast<uint32_t>(c.patch_size));
  w.SetU32("clip.vision.embedding_length", static_cast<uint32_t>(c.n_embd));
  w.SetU32("clip.vision.feed_forward_length", static_cast<uint32_t>(c.n_ff));
  w.SetU32("clip.vision.projection_dim", static_cast<uint32_t>(c.n_out));
  w.SetU32("clip.vision.block_count", static_cast<uint32_t>(c.n_layer));
  w.SetU32("clip.vision.attention.head_count", static_cast<uint32_t>(c.n_head));
  w.SetF32("clip.vision.attention.layer_norm_epsilon", 1e-6f);
  w.Set("clip.vision.image_mean", gguf::MakeF32Array({0.5f, 0.5f, 0.5f}));
  w.Set("clip.vision.image_std", gguf::MakeF32Array({0.5f, 0.5f, 0.5f}));
  w.SetU32("clip.vision.spatial_merge_size", 2);
  w.Set("clip.vision.is_deepstack_layers", gguf::MakeBoolArray(std::vector<bool>(c.n_layer, false)));

  enum Kind { kMat, kBias, kNormW, kPos };
  struct T {
    std::string name;
    std::vector<int64_t> ne;
    Kind kind;
  };
  const int64_t E = c.n_embd, ps = c.patch_size, mid = 4 * E;
  std::vector<T> ts = {{"v.patch_embd.weight", {ps, ps, 3, E}, kMat},
                       {"v.patch_embd.weight.1", {ps, ps, 3, E}, kMat},
                       {"v.patch_embd.bias", {E}, kBias},
                       {"v.position_embd.weight", {E, c.pos_side * c.pos_side}, kPos}};
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const std::string p = "v.blk." + std::to_string(il) + ".";
    ts.push_back({p + "attn_qkv.weight", {E, 3 * E}, kMat});
    ts.push_back({p + "attn_qkv.bias", {3 * E}, kBias});
    ts.push_back({p + "attn_out.weight", {E, E}, kMat});
    ts.push_back({p + "attn_out.bias", {E}, kBias});
    ts.push_back({p + "ffn_up.weight", {E, c.n_ff}, kMat});
    ts.push_back({p + "ffn_up.bias", {c.n_ff}, kBias});
    ts.push_back({p + "ffn_down.weight", {c.n_ff, E}, kMat});
    ts.push_back({p + "ffn_down.bias", {E}, kBias});
    ts.push_back({p + "ln1.weight", {E}, kNormW});
    ts.push_back({p + "ln1.bias", {E}, kBias});
    ts.push_back({p + "ln2.weight", {E}, kNormW});
    ts.push_back({p + "ln2.bias", {E}, kBias});
  }
  ts.push_back({"v.post_ln.weight", {E}, kNormW});
  ts.push_back({"v.post_ln.bias", {E}, kBias});
  ts.push_back({"mm.0.weight", {mid, mid}, kMat});
  ts.push_back({"mm.0.bias", {mid}, kBias});
  ts.push_back({"mm.2.weight", {mid, c.n_out}, kMat});
  ts.push_back({"mm.2.bias", {c.n_out}, kBias});
  auto type_of = [&](const T& t) {
    return t.kind == kMat && c.f16 ? gguf::TensorType::kF16 : gguf::TensorType::kF32;
  };
  for (const T& t : ts) REWIND_RETURN_IF_ERROR(w.AddTensor(t.name, type_of(t), t.ne));
  REWIND_RETURN_IF_ERROR(open(w));
  for (const T& t : ts) {
    int64_t cols = t.ne[0], rows = 1;
    for (size_t i = 1; i < t.ne.size(); ++i) rows *= t.ne[i];
    if (t.kind == kMat && t.ne.size() == 4) cols = t.ne[0] * t.ne[1] * t.ne[2];  // conv kernel: one row per output
    if (t.kind == kMat && t.ne.size() == 4) rows = t.ne[3];
    const double sd = t.kind == kMat ? (c.weight_scale > 0 ? c.weight_scale : 1.0 / std::sqrt(static_cast<double>(cols)))
                      : t.kind == kPos ? 0.5 : 0.05;
    std::vector<float> row(cols);
    std::vector<uint16_t> half(cols);
    for (int64_t r = 0; r < rows; ++r) {
      Rng rng(seed ^ (HashString(t.name) + 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(r + 1)));
      for (int64_t i = 0; i < cols; ++i)
        row[i] = static_cast<float>((t.kind == kNormW ? 1.0 : 0.0) + sd * rng.Normal());
      if (type_of(t) == gguf::TensorType::kF16) {
        for (int64_t i = 0; i < cols; ++i)
          half[i] = std::bit_cast<uint16_t>(static_cast<_Float16>(row[i]));
        REWIND_RETURN_IF_ERROR(w.WriteTensorChunk(t.name, half.data(), cols * 2));
      } else {
        REWIND_RETURN_IF_ERROR(w.WriteTensorChunk(t.name, row.data(), cols * 4));
      }
    }
  }
  return w.Close();
}

}  // namespace

Status WriteMmproj(const MmprojConfig& cfg, uint64_t seed, const std::string& path) {
  return Write(cfg, seed, [&](gguf::Writer& w) { return w.Open(path); });
}

Status WriteMmprojBuffer(const MmprojConfig& cfg, uint64_t seed, std::vector<uint8_t>* out) {
  return Write(cfg, seed, [&](gguf::Writer& w) { return w.OpenBuffer(out); });
}

}  // namespace rw::modelgen
