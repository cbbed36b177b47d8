#include "model/weights.h"

#include <string>

namespace rw::model {
namespace {

class Binder {
 public:
  explicit Binder(const gguf::File& f) : f_(f) {}

  bool Has(const std::string& name) const { return f_.FindTensor(name) != nullptr; }

  Expected<const gguf::TensorInfo*> Find(const std::string& name, std::initializer_list<int64_t> shape) const {
    const gguf::TensorInfo* t = f_.FindTensor(name);
    if (t == nullptr) return Error::NotFound("tensor '" + name + "' is missing");
    int64_t want[4] = {1, 1, 1, 1};
    int i = 0;
    for (int64_t d : shape) want[i++] = d;
    bool same = true;
    for (int k = 0; k < 4; ++k) same = same && t->ne[k] == want[k];
    if (!same) {
      std::string w = "{";
      for (int k = 0; k < i; ++k) w += (k ? ", " : "") + std::to_string(want[k]);
      w += "}";
      return Error::InvalidArgument("tensor '" + name + "' has shape " + t->ShapeString() + ", expected " + w);
    }
    return t;
  }

  // A matrix used through MatMul: any supported weight type. Extra dims (experts) fold into rows.
  Expected<Matrix> Mat(const std::string& name, std::initializer_list<int64_t> shape) const {
    REWIND_ASSIGN_OR_RETURN(const gguf::TensorInfo* t, Find(name, shape));
    if (!kernels::MatMulSupports(t->type))
      return Error::Unsupported("tensor '" + name + "' has type " + gguf::TypeName(t->type) +
                                ", which this build cannot multiply");
    Matrix m;
    m.type = t->type;
    m.data = t->data;
    m.n_cols = t->ne[0];
    m.n_rows = t->ne[1] * t->ne[2] * t->ne[3];
    m.row_bytes = t->row_bytes();
    return m;
  }

  // A vector or small tensor used as F32 (norm weights, conv kernel, dt bias, A).
  Expected<const float*> F32(const std::string& name, std::initializer_list<int64_t> shape) const {
    REWIND_ASSIGN_OR_RETURN(const gguf::TensorInfo* t, Find(name, shape));
    if (t->type != gguf::TensorType::kF32)
      return Error::Unsupported("tensor '" + name + "' has type " + gguf::TypeName(t->type) + ", expected F32");
    return reinterpret_cast<const float*>(t->data);
  }

 private:
  const gguf::File& f_;
};

std::string Blk(int il, const char* name) { return "blk." + std::to_string(il) + "." + name; }

}  // namespace

Expected<Weights> BindWeights(const gguf::File& file, const ModelConfig& c) {
  Binder b(file);
  Weights w;
  const int64_t E = c.n_embd, V = c.n_vocab;
  REWIND_ASSIGN_OR_RETURN(w.token_embd, b.Mat("token_embd.weight", {E, V}));
  REWIND_ASSIGN_OR_RETURN(w.output_norm, b.F32("output_norm.weight", {E}));
  if (b.Has("output.weight")) {
    REWIND_ASSIGN_OR_RETURN(w.output, b.Mat("output.weight", {E, V}));
  } else {
    w.output = w.token_embd;
    w.tied = true;
  }
  const int64_t D = c.head_dim, Hq = c.n_head, Hkv = c.n_head_kv;
  const int64_t S = c.ssm_state, Hv = c.ssm_heads, Kd = c.ssm_key_dim(), Vd = c.ssm_inner, C = c.ssm_conv_dim();
  const int64_t Kc = c.ssm_conv_kernel;
  w.layers.resize(c.n_layer);
  for (int il = 0; il < c.n_layer; ++il) {
    LayerWeights& L = w.layers[il];
    REWIND_ASSIGN_OR_RETURN(L.attn_norm, b.F32(Blk(il, "attn_norm.weight"), {E}));
    REWIND_ASSIGN_OR_RETURN(L.post_norm, b.F32(Blk(il, "post_attention_norm.weight"), {E}));
    if (c.kinds[il] == LayerKind::kGdn) {
      GdnWeights& g = L.gdn;
      if (c.arch == Arch::kQwen3Next && !b.Has(Blk(il, "attn_qkv.weight")) && b.Has(Blk(il, "ssm_in.weight"))) {
        g.legacy_in = true;
        REWIND_ASSIGN_OR_RETURN(g.in, b.Mat(Blk(il, "ssm_in.weight"), {E, 2 * Kd + 2 * Vd}));
      } else {
        REWIND_ASSIGN_OR_RETURN(g.qkv, b.Mat(Blk(il, "attn_qkv.weight"), {E, C}));
        REWIND_ASSIGN_OR_RETURN(g.gate, b.Mat(Blk(il, "attn_gate.weight"), {E, Vd}));
      }
      if (c.arch == Arch::kQwen3Next) {
        REWIND_ASSIGN_OR_RETURN(g.ba, b.Mat(Blk(il, "ssm_ba.weight"), {E, 2 * Hv}));
      } else {
        REWIND_ASSIGN_OR_RETURN(g.beta, b.Mat(Blk(il, "ssm_beta.weight"), {E, Hv}));
        REWIND_ASSIGN_OR_RETURN(g.alpha, b.Mat(Blk(il, "ssm_alpha.weight"), {E, Hv}));
      }
      REWIND_ASSIGN_OR_RETURN(g.out, b.Mat(Blk(il, "ssm_out.weight"), {Vd, E}));
      REWIND_ASSIGN_OR_RETURN(g.dt_bias, b.F32(Blk(il, "ssm_dt.bias"), {Hv}));
      REWIND_ASSIGN_OR_RETURN(g.ssm_a, b.F32(Blk(il, "ssm_a"), {Hv}));
      REWIND_ASSIGN_OR_RETURN(g.conv, b.F32(Blk(il, "ssm_conv1d.weight"), {Kc, C}));
      REWIND_ASSIGN_OR_RETURN(g.norm, b.F32(Blk(il, "ssm_norm.weight"), {S}));
    } else {
      AttnWeights& a = L.attn;
      if (b.Has(Blk(il, "attn_qkv.weight")) && !b.Has(Blk(il, "attn_q.weight")))
        return Error::Unsupported("tensor '" + Blk(il, "attn_qkv.weight") +
                                  "': fused attention qkv is not supported; expected attn_q/attn_k/attn_v");
      REWIND_ASSIGN_OR_RETURN(a.q, b.Mat(Blk(il, "attn_q.weight"), {E, 2 * D * Hq}));
      REWIND_ASSIGN_OR_RETURN(a.k, b.Mat(Blk(il, "attn_k.weight"), {E, D * Hkv}));
      REWIND_ASSIGN_OR_RETURN(a.v, b.Mat(Blk(il, "attn_v.weight"), {E, D * Hkv}));
      REWIND_ASSIGN_OR_RETURN(a.out, b.Mat(Blk(il, "attn_output.weight"), {D * Hq, E}));
      REWIND_ASSIGN_OR_RETURN(a.q_norm, b.F32(Blk(il, "attn_q_norm.weight"), {D}));
      REWIND_ASSIGN_OR_RETURN(a.k_norm, b.F32(Blk(il, "attn_k_norm.weight"), {D}));
    }
    FfnWeights& f = L.ffn;
    if (!c.is_moe()) {
      const int64_t F = c.n_ff;
      REWIND_ASSIGN_OR_RETURN(f.gate, b.Mat(Blk(il, "ffn_gate.weight"), {E, F}));
      REWIND_ASSIGN_OR_RETURN(f.up, b.Mat(Blk(il, "ffn_up.weight"), {E, F}));
      REWIND_ASSIGN_OR_RETURN(f.down, b.Mat(Blk(il, "ffn_down.weight"), {F, E}));
    } else {
      const int64_t X = c.n_expert, F = c.n_ff_exp, Fs = c.n_ff_shexp;
      REWIND_ASSIGN_OR_RETURN(f.router, b.Mat(Blk(il, "ffn_gate_inp.weight"), {E, X}));
      if (b.Has(Blk(il, "ffn_gate_up_exps.weight"))) {
        f.fused_gate_up = true;
        REWIND_ASSIGN_OR_RETURN(f.gate_up_exps, b.Mat(Blk(il, "ffn_gate_up_exps.weight"), {E, 2 * F, X}));
      } else {
        REWIND_ASSIGN_OR_RETURN(f.gate_exps, b.Mat(Blk(il, "ffn_gate_exps.weight"), {E, F, X}));
        REWIND_ASSIGN_OR_RETURN(f.up_exps, b.Mat(Blk(il, "ffn_up_exps.weight"), {E, F, X}));
      }
      REWIND_ASSIGN_OR_RETURN(f.down_exps, b.Mat(Blk(il, "ffn_down_exps.weight"), {F, E, X}));
      REWIND_ASSIGN_OR_RETURN(f.shexp_gate_inp, b.Mat(Blk(il, "ffn_gate_inp_shexp.weight"), {E}));
      REWIND_ASSIGN_OR_RETURN(f.shexp_gate, b.Mat(Blk(il, "ffn_gate_shexp.weight"), {E, Fs}));
      REWIND_ASSIGN_OR_RETURN(f.shexp_up, b.Mat(Blk(il, "ffn_up_shexp.weight"), {E, Fs}));
      REWIND_ASSIGN_OR_RETURN(f.shexp_down, b.Mat(Blk(il, "ffn_down_shexp.weight"), {Fs, E}));
    }
  }
  return w;
}

}  // namespace rw::model
