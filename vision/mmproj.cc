#include "vision/mmproj.h"

#include <cmath>
#include <set>

namespace rw::vision {

namespace {

struct Binder {
  const gguf::File& f;
  std::set<std::string> used;

  Expected<const gguf::TensorInfo*> Get(const std::string& name, int64_t ne0, int64_t ne1 = -1) {
    const gguf::TensorInfo* t = f.FindTensor(name);
    if (t == nullptr) return Error::InvalidArgument("mmproj: missing tensor " + name);
    if (t->ne[0] != ne0 || (ne1 >= 0 && t->ne[1] != ne1))
      return Error::InvalidArgument("mmproj: tensor " + name + " has shape " + t->ShapeString() + ", expected {" +
                                    std::to_string(ne0) + (ne1 >= 0 ? ", " + std::to_string(ne1) : "") + "}");
    used.insert(name);
    return t;
  }
  Expected<const float*> Vec(const std::string& name, int64_t n) {
    REWIND_ASSIGN_OR_RETURN(const gguf::TensorInfo* t, Get(name, n));
    if (t->type != gguf::TensorType::kF32 || t->n_elements() != n)
      return Error::Unsupported("mmproj: tensor " + name + " must be F32 with " + std::to_string(n) + " elements");
    return reinterpret_cast<const float*>(t->data);
  }
  Expected<kernels::Matrix> Mat(const std::string& name, int64_t cols, int64_t rows) {
    REWIND_ASSIGN_OR_RETURN(const gguf::TensorInfo* t, Get(name, cols, rows));
    if (t->n_elements() != cols * rows)
      return Error::InvalidArgument("mmproj: tensor " + name + " has shape " + t->ShapeString());
    if (!kernels::MatMulSupports(t->type))
      return Error::Unsupported("mmproj: tensor " + name + " has type " + gguf::TypeName(t->type) +
                                ", which this build cannot multiply");
    kernels::Matrix m;
    m.type = t->type;
    m.data = t->data;
    m.n_cols = cols;
    m.n_rows = rows;
    m.row_bytes = t->row_bytes();
    return m;
  }
};

Expected<int32_t> U32(const gguf::File& f, const std::string& key) {
  auto v = f.GetU32(key);
  if (!v) return Error::InvalidArgument("mmproj: missing or bad key " + key);
  if (*v == 0 || *v > (1u << 20)) return Error::InvalidArgument("mmproj: key " + key + " out of range");
  return static_cast<int32_t>(*v);
}

}  // namespace

Expected<std::unique_ptr<Mmproj>> Mmproj::Load(const std::string& path) {
  REWIND_ASSIGN_OR_RETURN(auto file, gguf::File::Open(path));
  auto m = FromFile(std::move(file));
  if (m) (*m)->path_ = path;
  return m;
}

Expected<std::unique_ptr<Mmproj>> Mmproj::FromFile(std::unique_ptr<gguf::File> file) {
  const gguf::File& f = *file;
  auto arch = f.GetString("general.architecture");
  if (!arch || *arch != "clip")
    return Error::InvalidArgument("mmproj: general.architecture is '" + (arch ? *arch : std::string("?")) +
                                  "', not 'clip': is this a language model instead of its --mmproj file?");
  if (auto audio = f.GetBool("clip.has_audio_encoder"); audio && *audio)
    return Error::Unsupported("mmproj: the file has an audio encoder (clip.has_audio_encoder); only the "
                              "qwen3vl_merger vision projector is supported");
  std::string proj;
  if (auto p = f.GetString("clip.projector_type")) proj = *p;
  else if (auto pv = f.GetString("clip.vision.projector_type")) proj = *pv;
  if (proj != "qwen3vl_merger")
    return Error::Unsupported("mmproj: projector type '" + proj +
                              "' is not supported (only qwen3vl_merger, the Qwen3-VL / Qwen3.5 / Qwen3.6 projector)");
  if (auto v = f.GetBool("clip.has_vision_encoder"); v && !*v)
    return Error::InvalidArgument("mmproj: clip.has_vision_encoder is false");
  if (const gguf::Value* ds = f.Find("clip.vision.is_deepstack_layers"); ds != nullptr)
    for (const auto& e : ds->array)
      if (e.u != 0)
        return Error::Unsupported("mmproj: the vision tower has deepstack layers (clip.vision.is_deepstack_layers; "
                                  "Qwen3-VL); only Qwen3.5 / Qwen3.6 towers without deepstack are supported");

  std::unique_ptr<Mmproj> m(new Mmproj());
  VisionConfig& c = m->cfg_;
  REWIND_ASSIGN_OR_RETURN(c.n_embd, U32(f, "clip.vision.embedding_length"));
  REWIND_ASSIGN_OR_RETURN(c.n_head, U32(f, "clip.vision.attention.head_count"));
  REWIND_ASSIGN_OR_RETURN(c.n_ff, U32(f, "clip.vision.feed_forward_length"));
  REWIND_ASSIGN_OR_RETURN(c.n_layer, U32(f, "clip.vision.block_count"));
  REWIND_ASSIGN_OR_RETURN(c.patch_size, U32(f, "clip.vision.patch_size"));
  if (f.Has("clip.vision.spatial_merge_size")) {
    REWIND_ASSIGN_OR_RETURN(c.n_merge, U32(f, "clip.vision.spatial_merge_size"));
  }
  if (c.n_merge != 2) return Error::Unsupported("mmproj: spatial_merge_size " + std::to_string(c.n_merge) + " (only 2)");
  if (f.Has("clip.vision.attention.head_count_kv")) {
    REWIND_ASSIGN_OR_RETURN(int32_t kv, U32(f, "clip.vision.attention.head_count_kv"));
    if (kv != c.n_head) return Error::Unsupported("mmproj: grouped-query attention in the vision tower");
  }
  if (f.Has("clip.vision.attention.head_dim")) {
    REWIND_ASSIGN_OR_RETURN(int32_t hd, U32(f, "clip.vision.attention.head_dim"));
    if (hd * c.n_head != c.n_embd) return Error::Unsupported("mmproj: head_dim * head_count != embedding_length");
  }
  if (c.n_embd % c.n_head != 0) return Error::InvalidArgument("mmproj: embedding_length not divisible by head_count");
  c.d_head = c.n_embd / c.n_head;
  if (c.d_head % 4 != 0) return Error::InvalidArgument("mmproj: head size must be a multiple of 4 (vision RoPE)");
  auto eps = f.GetF32("clip.vision.attention.layer_norm_epsilon");
  if (!eps) return Error::InvalidArgument("mmproj: missing clip.vision.attention.layer_norm_epsilon");
  c.eps = *eps;
  auto use_gelu = f.GetBool("clip.use_gelu");
  if (!use_gelu || !*use_gelu) return Error::Unsupported("mmproj: clip.use_gelu is not true (qwen3vl_merger uses GELU)");
  if (auto silu = f.GetBool("clip.use_silu"); silu && *silu) return Error::Unsupported("mmproj: clip.use_silu");
  auto mean = f.GetF32Array("clip.vision.image_mean");
  auto sd = f.GetF32Array("clip.vision.image_std");
  if (!mean || !sd || mean->size() < 3 || sd->size() < 3)
    return Error::InvalidArgument("mmproj: clip.vision.image_mean / image_std need 3 values");
  for (int i = 0; i < 3; ++i) {
    c.mean[i] = (*mean)[i];
    c.std[i] = (*sd)[i];
    if (!(c.std[i] != 0.0f)) return Error::InvalidArgument("mmproj: image_std has a zero");
  }

  Binder b{f, {}};
  const int64_t E = c.n_embd, ps = c.patch_size, in = 3 * ps * ps;
  for (const char* name : {"v.patch_embd.weight", "v.patch_embd.weight.1"}) {
    const gguf::TensorInfo* t = f.FindTensor(name);
    if (t == nullptr) return Error::InvalidArgument(std::string("mmproj: missing tensor ") + name);
    if (t->ne[0] != ps || t->ne[1] != ps || t->ne[2] != 3 || t->ne[3] != E)
      return Error::InvalidArgument(std::string("mmproj: tensor ") + name + " has shape " + t->ShapeString());
  }
  auto conv = [&](const char* name) -> Expected<kernels::Matrix> {
    const gguf::TensorInfo* t = f.FindTensor(name);
    if (!kernels::MatMulSupports(t->type))
      return Error::Unsupported(std::string("mmproj: tensor ") + name + " has an unsupported type");
    b.used.insert(name);
    kernels::Matrix mat;
    mat.type = t->type;
    mat.data = t->data;
    mat.n_cols = in;
    mat.n_rows = E;
    mat.row_bytes = t->nbytes / E;
    return mat;
  };
  REWIND_ASSIGN_OR_RETURN(m->patch0, conv("v.patch_embd.weight"));
  REWIND_ASSIGN_OR_RETURN(m->patch1, conv("v.patch_embd.weight.1"));
  REWIND_ASSIGN_OR_RETURN(m->patch_bias, b.Vec("v.patch_embd.bias", E));
  {
    REWIND_ASSIGN_OR_RETURN(const gguf::TensorInfo* t, b.Get("v.position_embd.weight", E));
    const int64_t rows = t->ne[1];
    c.pos_side = static_cast<int32_t>(std::lround(std::sqrt(static_cast<double>(rows))));
    if (static_cast<int64_t>(c.pos_side) * c.pos_side != rows)
      return Error::InvalidArgument("mmproj: v.position_embd.weight rows are not a square");
    REWIND_ASSIGN_OR_RETURN(kernels::Matrix pm, b.Mat("v.position_embd.weight", E, rows));
    m->pos_embd.resize(static_cast<size_t>(rows) * E);
    for (int64_t r = 0; r < rows; ++r) kernels::DequantizeRowTo(pm, r, m->pos_embd.data() + r * E);
  }
  m->layers.resize(c.n_layer);
  for (int32_t il = 0; il < c.n_layer; ++il) {
    VisionLayer& L = m->layers[il];
    const std::string p = "v.blk." + std::to_string(il) + ".";
    REWIND_ASSIGN_OR_RETURN(L.qkv, b.Mat(p + "attn_qkv.weight", E, 3 * E));
    REWIND_ASSIGN_OR_RETURN(L.qkv_b, b.Vec(p + "attn_qkv.bias", 3 * E));
    REWIND_ASSIGN_OR_RETURN(L.out, b.Mat(p + "attn_out.weight", E, E));
    REWIND_ASSIGN_OR_RETURN(L.out_b, b.Vec(p + "attn_out.bias", E));
    REWIND_ASSIGN_OR_RETURN(L.up, b.Mat(p + "ffn_up.weight", E, c.n_ff));
    REWIND_ASSIGN_OR_RETURN(L.up_b, b.Vec(p + "ffn_up.bias", c.n_ff));
    REWIND_ASSIGN_OR_RETURN(L.down, b.Mat(p + "ffn_down.weight", c.n_ff, E));
    REWIND_ASSIGN_OR_RETURN(L.down_b, b.Vec(p + "ffn_down.bias", E));
    REWIND_ASSIGN_OR_RETURN(L.ln1_w, b.Vec(p + "ln1.weight", E));
    REWIND_ASSIGN_OR_RETURN(L.ln1_b, b.Vec(p + "ln1.bias", E));
    REWIND_ASSIGN_OR_RETURN(L.ln2_w, b.Vec(p + "ln2.weight", E));
    REWIND_ASSIGN_OR_RETURN(L.ln2_b, b.Vec(p + "ln2.bias", E));
  }
  REWIND_ASSIGN_OR_RETURN(m->post_ln_w, b.Vec("v.post_ln.weight", E));
  REWIND_ASSIGN_OR_RETURN(m->post_ln_b, b.Vec("v.post_ln.bias", E));
  const gguf::TensorInfo* mm0 = f.FindTensor("mm.0.weight");
  const gguf::TensorInfo* mm2 = f.FindTensor("mm.2.weight");
  if (mm0 == nullptr || mm2 == nullptr) return Error::InvalidArgument("mmproj: missing mm.0.weight or mm.2.weight");
  const int64_t n_mid = mm0->ne[1];
  c.n_out = static_cast<int32_t>(mm2->ne[1]);
  REWIND_ASSIGN_OR_RETURN(m->mm0, b.Mat("mm.0.weight", 4 * E, n_mid));
  REWIND_ASSIGN_OR_RETURN(m->mm0_b, b.Vec("mm.0.bias", n_mid));
  REWIND_ASSIGN_OR_RETURN(m->mm2, b.Mat("mm.2.weight", n_mid, c.n_out));
  REWIND_ASSIGN_OR_RETURN(m->mm2_b, b.Vec("mm.2.bias", c.n_out));
  for (const auto& t : f.tensors()) {
    if (b.used.count(t.name)) continue;
    if (t.name.find("deepstack") != std::string::npos)
      return Error::Unsupported("mmproj: deepstack tensor " + t.name + " (Qwen3-VL) is not supported");
    if (t.name.rfind("a.", 0) == 0) return Error::Unsupported("mmproj: audio tensor " + t.name + " is not supported");
    return Error::Unsupported("mmproj: tensor " + t.name + " is not part of the qwen3vl_merger projector we run");
  }

  Sha256Hasher h;
  h.Update("rewind-mmproj-v1");
  const uint64_t fp = f.Fingerprint();
  h.Update(&fp, sizeof(fp));
  for (const auto& t : f.tensors()) {
    h.Update(t.name);
    h.Update(t.ne, sizeof(t.ne));
    h.Update(&t.type, sizeof(t.type));
  }
  m->identity_ = h.Final();
  m->file_ = std::move(file);
  return m;
}

}  // namespace rw::vision
