// Weights bound by name from a GGUF file with exact shape checks (spec model-qwen35.md section 5). Pointers refer
// into the File's mapping, which must outlive the Weights. MTP / NextN blocks are not bound (not executed).
#pragma once

#include <cstdint>
#include <vector>

#include "base/expected.h"
#include "gguf/gguf.h"
#include "kernels/matmul.h"
#include "model/config.h"

namespace rw::model {

using kernels::Matrix;

struct GdnWeights {
  Matrix qkv;        // {E, C}   rows [q Kd | k Kd | v Vd]      (absent with legacy ssm_in)
  Matrix gate;       // {E, Vd}  z                               (absent with legacy ssm_in)
  Matrix in;         // {E, 2Kd + 2Vd} legacy qwen3next ssm_in (Hk groups of [q, k, v, z])
  bool legacy_in = false;
  Matrix beta;       // {E, Hv}  qwen35*
  Matrix alpha;      // {E, Hv}  qwen35*
  Matrix ba;         // {E, 2Hv} qwen3next: Hk groups of [b (r), a (r)]
  Matrix out;        // {Vd, E}
  const float* dt_bias = nullptr;  // [Hv]
  const float* ssm_a = nullptr;    // [Hv] = -exp(A_log)
  const float* conv = nullptr;     // [C][Kc]
  const float* norm = nullptr;     // [S]
};

// Mamba-2 mixer (nemotron_h). d_in = 2·d_inner + 2·G·N + H, C = d_inner + 2·G·N.
struct Mamba2Weights {
  Matrix in;                        // {E, d_in}: rows [z d_inner | x d_inner | B G·N | C G·N | dt H]
  Matrix out;                       // {d_inner, E}
  const float* conv = nullptr;      // [C][Kc]
  const float* conv_bias = nullptr; // [C] (null: none)
  const float* dt_bias = nullptr;   // [H]
  const float* ssm_a = nullptr;     // [H] = -exp(A_log)
  const float* ssm_d = nullptr;     // [H] skip
  const float* norm = nullptr;      // [G][d_inner / G] grouped RMSNorm gains (null: no norm)
};

// LFM2 gated short convolution: [B | C | x] = in · h;  y = C ⊙ conv(B ⊙ x);  out · y.
struct ShortConvWeights {
  Matrix in;                    // {E, 3E}: rows [B E | C E | x E]
  Matrix out;                   // {E, E}
  const float* conv = nullptr;  // [E][L] (shortconv.l_cache taps per channel, no bias)
};

// Kimi Delta Attention (kimi-linear): q, k, v projections each {E, H·S} with their own conv taps; the decay gate
// g = A_h · softplus(f_b · f_a · x + dt_bias) per key channel; beta = sigmoid(b · x); output gate
// sigmoid(g_b · g_a · x) after a per-head RMSNorm.
struct KdaWeights {
  Matrix q, k, v;                  // {E, H·S}
  const float* conv[3] = {};       // q, k, v taps [H·S][Kc]
  Matrix f_a, f_b;                 // {E, S}, {S, H·S}
  Matrix beta;                     // {E, H}
  const float* ssm_a = nullptr;    // [H] = -exp(A_log)
  const float* dt_bias = nullptr;  // [H·S]
  Matrix g_a, g_b;                 // {E, S}, {S, H·S}
  const float* norm = nullptr;     // [S]
  Matrix out;                      // {H·S, E}
};

// Multi-head latent attention of kimi-linear, absorbed form (no RoPE, uncompressed query).
struct MlaWeights {
  Matrix q;                          // {E, H·mla_k}: per head [nope | rope]
  Matrix kv_a;                       // {E, R + n_rot}: [latent | k_pe]
  const float* kv_a_norm = nullptr;  // [R]
  Matrix k_b;                        // {nope, R, H}: head h = rows [h·R, (h+1)·R) of width nope
  Matrix v_b;                        // {R, mla_v, H}: head h = rows [h·mla_v, (h+1)·mla_v) of width R
  Matrix out;                        // {H·mla_v, E}
};

struct AttnWeights {
  Matrix q;          // {E, 2·D·Hq}: per head [q (D) | gate (D)]  (plain attention: {E, D·Hq})
  Matrix k, v;       // {E, D·Hkv}
  Matrix out;        // {D·Hq, E}
  const float* q_norm = nullptr;  // [D]
  const float* k_norm = nullptr;  // [D]
};

struct FfnWeights {
  // Dense (qwen35; nemotron_h: up and down only, ReLU²).
  Matrix gate, up, down;
  // MoE: expert e owns rows [e·F, (e+1)·F) of gate_exps/up_exps and rows [e·E, (e+1)·E) of down_exps.
  Matrix router;       // {E, X} F32
  Matrix gate_exps;    // {E, F, X} as X·F rows
  Matrix up_exps;      // {E, F, X}
  Matrix gate_up_exps; // {E, 2F, X} alternative: per expert rows [0,F) gate, [F,2F) up
  bool fused_gate_up = false;
  Matrix down_exps;    // {F, E, X} as X·E rows
  Matrix shexp_gate_inp;  // {E} as one row
  Matrix shexp_gate, shexp_up, shexp_down;
  const float* exp_probs_b = nullptr;  // [X] nemotron_h_moe expert-selection bias (null: none)
};

struct LayerWeights {
  const float* attn_norm = nullptr;  // [E]
  const float* post_norm = nullptr;  // [E] FFN norm (null: a one-sub-layer block, nemotron_h)
  GdnWeights gdn;
  Mamba2Weights mamba;
  ShortConvWeights conv;
  KdaWeights kda;
  MlaWeights mla;
  AttnWeights attn;
  FfnWeights ffn;
};

struct Weights {
  Matrix token_embd;   // {E, n_vocab}
  Matrix output;       // {E, n_vocab}; == token_embd when tied
  bool tied = false;
  const float* output_norm = nullptr;  // [E]
  std::vector<LayerWeights> layers;    // [n_layer]
};

// Errors name the tensor: missing, wrong shape (expected vs found) or unsupported type.
Expected<Weights> BindWeights(const gguf::File& file, const ModelConfig& cfg);

// Rows [first, first + n) of a matrix as a matrix (one expert of a stacked 3-D tensor).
inline Matrix RowSlice(const Matrix& m, int64_t first, int64_t n) {
  Matrix s = m;
  s.data = m.Row(first);
  s.n_rows = n;
  return s;
}

}  // namespace rw::model
