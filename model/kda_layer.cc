// Kimi Delta Attention layer (kimi-linear; llama.cpp v0.5.0 llama_model_kimi_linear's KDA branch): q, k, v
// projections each through its own causal conv window and SiLU, q and k L2-normalised per head, the gated delta
// rule with one decay exp(A_h · softplus(f_b·f_a·x + dt_bias)) per key channel (kernels::GdnHeadSteps), then a
// per-head RMSNorm times sigmoid(g_b·g_a·x) and the output projection.
// State per sequence: the q|k|v conv windows [3·H·S][Kc-1] (llama.cpp's layout: q's, then k's, then v's) and
// [H][S][S]. Replay row: raw q | k | v, beta (pre-sigmoid), the gate projection (before dt_bias).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/activation.h"
#include "kernels/alloc_tuning.h"
#include "kernels/conv.h"
#include "kernels/matmul.h"
#include "kernels/norm.h"
#include "model/layers.h"

namespace rw::model::internal {

using kernels::ParallelFor;
using kernels::ScratchBuffer;

void KdaUpdate(const ModelConfig& cfg, const KdaWeights& w, const KdaInputs& in, float* conv_state,
               float* delta_state, float* o, kernels::ThreadPool* pool, const float* conv_in,
               const float* delta_in, int32_t out_from) {
  const int32_t T = in.T, S = cfg.ssm_state, H = cfg.ssm_heads, D = cfg.ssm_inner, C = 3 * D;
  const int32_t Kc = cfg.ssm_conv_kernel;
  if (conv_in != nullptr && conv_in != conv_state)  // small: [C][Kc-1]
    std::memcpy(conv_state, conv_in, sizeof(float) * static_cast<size_t>(C) * (Kc - 1));
  if (delta_in == delta_state) delta_in = nullptr;
  if (T <= 0) {
    if (delta_in != nullptr) std::memcpy(delta_state, delta_in, sizeof(float) * static_cast<size_t>(H) * S * S);
    return;
  }
  thread_local ScratchBuffer<float> u_buf, beta_buf, dec_buf;
  float* u = u_buf.Get(static_cast<size_t>(T) * C);      // [T][q D | k D | v D] conv -> silu -> L2 (q, k)
  float* beta = beta_buf.Get(static_cast<size_t>(T) * H);  // [T][H]
  float* dec = dec_buf.Get(static_cast<size_t>(T) * D);    // [T][H][S] per-channel decay
  // Causal convs: channels are independent, tokens strictly in order (q, k, v: three weight tensors).
  ParallelFor(pool, C, [&](int64_t c0, int64_t c1) {
    for (int32_t p = 0; p < 3; ++p) {
      const int64_t lo = std::max<int64_t>(c0, int64_t{p} * D), hi = std::min<int64_t>(c1, int64_t{p + 1} * D);
      if (lo >= hi) continue;
      kernels::CausalConvRun(conv_state + static_cast<int64_t>(p) * D * (Kc - 1), w.conv[p], in.x[p], in.x_stride,
                             T, lo - int64_t{p} * D, hi - int64_t{p} * D, Kc, u + static_cast<int64_t>(p) * D, C);
    }
  }, 64);
  // SiLU, L2 norms, beta and decays: per token.
  ParallelFor(pool, T, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      float* row = u + t * C;
      ActivateQkvRow(cfg, row, o != nullptr && t >= out_from);  // replay rows never read q
      const float* b = in.beta + t * in.beta_stride;
      const float* g = in.gate + t * in.gate_stride;
      for (int32_t h = 0; h < H; ++h) {
        beta[t * H + h] = kernels::Sigmoid(b[h]);
        for (int32_t i = 0; i < S; ++i) {
          const int32_t c = h * S + i;
          dec[t * D + c] = std::exp(kernels::Softplus(g[c] + w.dt_bias[c]) * w.ssm_a[h]);
        }
      }
    }
  });
  // Delta rule: heads are independent, tokens strictly in order (GDN's, with one decay per key channel).
  DeltaRuleHeads(cfg, u, T, beta, nullptr, dec, delta_state, delta_in, o, out_from, pool);
}

void KdaForward(const ModelConfig& cfg, const KdaWeights& w, int32_t rec_index, const float* t, int32_t N,
                std::span<const SeqRun> seqs, StateStorage& states, ReplayLog* replay, float* out,
                kernels::ThreadPool* pool) {
  const int32_t S = cfg.ssm_state, H = cfg.ssm_heads, D = cfg.ssm_inner;
  thread_local ScratchBuffer<float> q_buf, k_buf, v_buf, b_buf, fa_buf, gf_buf, o_buf, ga_buf, g2_buf;
  float* q = q_buf.Get(static_cast<size_t>(N) * D);
  float* k = k_buf.Get(static_cast<size_t>(N) * D);
  float* v = v_buf.Get(static_cast<size_t>(N) * D);
  float* b = b_buf.Get(static_cast<size_t>(N) * H);
  float* fa = fa_buf.Get(static_cast<size_t>(N) * S);
  float* gf = gf_buf.Get(static_cast<size_t>(N) * D);  // f_b·f_a·x
  float* ga = ga_buf.Get(static_cast<size_t>(N) * S);  // g_a·x
  float* g2 = g2_buf.Get(static_cast<size_t>(N) * D);  // g_b·g_a·x
  // Two regions: every product of x, then the second factors of the low-rank gates.
  using kernels::Product;
  const kernels::MatMulJob first[] = {Product(w.q, t, N, q),    Product(w.k, t, N, k),     Product(w.v, t, N, v),
                                      Product(w.beta, t, N, b), Product(w.f_a, t, N, fa),  Product(w.g_a, t, N, ga)};
  kernels::MatMulMany(first, pool);
  const kernels::MatMulJob second[] = {Product(w.f_b, fa, N, gf), Product(w.g_b, ga, N, g2)};
  kernels::MatMulMany(second, pool);
  const RowPiece pieces[] = {{q, D, D}, {k, D, D}, {v, D, D}, {b, H, H}, {gf, D, D}};
  if (replay != nullptr) RecordReplayRows(cfg, rec_index, seqs, pieces, replay);
  float* o = o_buf.Get(static_cast<size_t>(N) * D);  // [N][D] core output
  for (const SeqRun& s : seqs) {
    const int64_t r0 = s.row0;
    KdaInputs in;
    in.x[0] = q + r0 * D;
    in.x[1] = k + r0 * D;
    in.x[2] = v + r0 * D;
    in.x_stride = D;
    in.beta = b + r0 * H;
    in.beta_stride = H;
    in.gate = gf + r0 * D;
    in.gate_stride = D;
    in.T = s.n;
    const int32_t P = s.prefix != nullptr ? s.prefix_rows : 0;
    if (P > 0) in = KdaReplayInputs(cfg, JoinPrefixRows(cfg, rec_index, s, pieces), cfg.replay_row_floats(), P + s.n);
    const bool other = s.slot_in >= 0 && s.slot_in != s.slot;
    KdaUpdate(cfg, w, in, states.Conv(s.slot, rec_index), states.Delta(s.slot, rec_index), o + r0 * D, pool,
              other ? states.Conv(s.slot_in, rec_index) : nullptr,
              other ? states.Delta(s.slot_in, rec_index) : nullptr, P);
  }
  // Output gate: RMSNorm per head times sigmoid(g_b·g_a·x), then the output projection.
  ParallelFor(pool, N, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      for (int32_t h = 0; h < H; ++h) {
        float* oh = o + i * D + h * S;
        kernels::RmsNorm(oh, w.norm, S, cfg.eps, oh);
        kernels::MulSigmoid(oh, g2 + i * D + h * S, S);
      }
  });
  kernels::MatMul(w.out, o, N, out, pool);
}

KdaInputs KdaReplayInputs(const ModelConfig& cfg, const float* rows, int64_t stride, int32_t T) {
  const int64_t D = cfg.ssm_inner;
  KdaInputs in;
  for (int p = 0; p < 3; ++p) in.x[p] = rows + p * D;
  in.x_stride = stride;
  in.beta = rows + 3 * D;
  in.beta_stride = stride;
  in.gate = rows + 3 * D + cfg.ssm_heads;
  in.gate_stride = stride;
  in.T = T;
  return in;
}

}  // namespace rw::model::internal
