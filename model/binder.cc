#include "model/binder.h"

namespace rw::model::internal {

Expected<const gguf::TensorInfo*> TensorBinder::Find(const std::string& n,
                                                     std::initializer_list<int64_t> shape) const {
  const std::string name = Name(n);
  const gguf::TensorInfo* t = f_.FindTensor(name);
  if (t == nullptr) return Error::NotFound(what_ + " '" + name + "' is missing");
  int64_t want[4] = {1, 1, 1, 1};
  int i = 0;
  for (int64_t d : shape) want[i++] = d;
  bool same = true;
  for (int k = 0; k < 4; ++k) same = same && t->ne[k] == want[k];
  if (!same) {
    std::string w = "{";
    for (int k = 0; k < i; ++k) w += (k ? ", " : "") + std::to_string(want[k]);
    w += "}";
    return Error::InvalidArgument(what_ + " '" + name + "' has shape " + t->ShapeString() + ", expected " + w);
  }
  return t;
}

Expected<Matrix> TensorBinder::Mat(const std::string& n, std::initializer_list<int64_t> shape) const {
  REWIND_ASSIGN_OR_RETURN(const gguf::TensorInfo* t, Find(n, shape));
  if (!kernels::MatMulSupports(t->type))
    return Error::Unsupported(what_ + " '" + Name(n) + "' has type " + gguf::TypeName(t->type) +
                              ", which this build cannot multiply");
  Matrix m;
  m.type = t->type;
  m.data = t->data;
  m.n_cols = t->ne[0];
  m.n_rows = t->ne[1] * t->ne[2] * t->ne[3];
  m.row_bytes = t->row_bytes();
  return m;
}

Expected<const float*> TensorBinder::F32(const std::string& n, std::initializer_list<int64_t> shape) const {
  REWIND_ASSIGN_OR_RETURN(const gguf::TensorInfo* t, Find(n, shape));
  if (t->type != gguf::TensorType::kF32)
    return Error::Unsupported(what_ + " '" + Name(n) + "' has type " + gguf::TypeName(t->type) + ", expected F32");
  return reinterpret_cast<const float*>(t->data);
}

Status BindAttention(const TensorBinder& b, const ModelConfig& c, AttnWeights* a) {
  const int64_t E = c.n_embd, D = c.head_dim, Hq = c.n_head, Hkv = c.n_head_kv;
  if (b.Has("attn_qkv.weight") && !b.Has("attn_q.weight"))
    return Error::Unsupported(b.what() + " '" + b.Name("attn_qkv.weight") +
                              "': fused attention qkv is not supported; expected attn_q/attn_k/attn_v");
  REWIND_ASSIGN_OR_RETURN(a->q, b.Mat("attn_q.weight", {E, 2 * D * Hq}));
  REWIND_ASSIGN_OR_RETURN(a->k, b.Mat("attn_k.weight", {E, D * Hkv}));
  REWIND_ASSIGN_OR_RETURN(a->v, b.Mat("attn_v.weight", {E, D * Hkv}));
  REWIND_ASSIGN_OR_RETURN(a->out, b.Mat("attn_output.weight", {D * Hq, E}));
  REWIND_ASSIGN_OR_RETURN(a->q_norm, b.F32("attn_q_norm.weight", {D}));
  REWIND_ASSIGN_OR_RETURN(a->k_norm, b.F32("attn_k_norm.weight", {D}));
  return Status::Ok();
}

Status BindFfn(const TensorBinder& b, const ModelConfig& c, FfnWeights* f) {
  const int64_t E = c.n_embd;
  if (!c.softmax_moe()) {
    const int64_t F = c.n_ff;
    REWIND_ASSIGN_OR_RETURN(f->gate, b.Mat("ffn_gate.weight", {E, F}));
    REWIND_ASSIGN_OR_RETURN(f->up, b.Mat("ffn_up.weight", {E, F}));
    REWIND_ASSIGN_OR_RETURN(f->down, b.Mat("ffn_down.weight", {F, E}));
    return Status::Ok();
  }
  const int64_t X = c.n_expert, F = c.n_ff_exp, Fs = c.n_ff_shexp;
  REWIND_ASSIGN_OR_RETURN(f->router, b.Mat("ffn_gate_inp.weight", {E, X}));
  if (b.Has("ffn_gate_up_exps.weight")) {
    f->fused_gate_up = true;
    REWIND_ASSIGN_OR_RETURN(f->gate_up_exps, b.Mat("ffn_gate_up_exps.weight", {E, 2 * F, X}));
  } else {
    REWIND_ASSIGN_OR_RETURN(f->gate_exps, b.Mat("ffn_gate_exps.weight", {E, F, X}));
    REWIND_ASSIGN_OR_RETURN(f->up_exps, b.Mat("ffn_up_exps.weight", {E, F, X}));
  }
  REWIND_ASSIGN_OR_RETURN(f->down_exps, b.Mat("ffn_down_exps.weight", {F, E, X}));
  if (c.is_moe()) {  // Qwen: the shared expert is gated by sigmoid(ffn_gate_inp_shexp · x); Granite: ungated
    REWIND_ASSIGN_OR_RETURN(f->shexp_gate_inp, b.Mat("ffn_gate_inp_shexp.weight", {E}));
  } else if (Fs == 0) {
    return Status::Ok();  // Granite without a shared expert
  }
  REWIND_ASSIGN_OR_RETURN(f->shexp_gate, b.Mat("ffn_gate_shexp.weight", {E, Fs}));
  REWIND_ASSIGN_OR_RETURN(f->shexp_up, b.Mat("ffn_up_shexp.weight", {E, Fs}));
  REWIND_ASSIGN_OR_RETURN(f->shexp_down, b.Mat("ffn_down_shexp.weight", {Fs, E}));
  return Status::Ok();
}

}  // namespace rw::model::internal
