// Mamba-2 mixer (llama.cpp v0.5.0 llm_build_mamba_base::build_mamba2_layer, ggml_ssm_conv + ggml_ssm_scan):
//   zxBCdt = ssm_in · x;  xBC = silu(conv1d(xBC) + conv_bias);  dt = softplus(dt + dt_bias);  dA = exp(dt·A)
//   per head h (group g = h / (H/G)), token by token:  s = s·dA + B_g ⊗ (x_h·dt);  y_h = s·C_g + D_h·x_h
//   y = grouped RMSNorm(y · silu(z)) · ssm_norm;  out = ssm_out · y
// The recurrence runs strictly token by token (kernels/ssm.h) in a prompt as in decoding, so a prefix
// computed in any split gives the same bits (I1); the replay log keeps the raw xBC and dt rows (what a replay
// needs).
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/activation.h"
#include "kernels/alloc_tuning.h"
#include "kernels/conv.h"
#include "kernels/matmul.h"
#include "kernels/norm.h"
#include "kernels/ssm.h"
#include "model/layers.h"

namespace rw::model::internal {

using kernels::ParallelFor;
using kernels::ScratchBuffer;

void Mamba2Update(const ModelConfig& cfg, const Mamba2Weights& w, const Mamba2Inputs& in, float* conv_state,
                  float* ssm_state, float* y, kernels::ThreadPool* pool, const float* conv_in,
                  const float* ssm_in, int32_t out_from) {
  const int32_t T = in.T, N = cfg.ssm_state, G = cfg.ssm_group, H = cfg.ssm_heads, P = cfg.ssm_head_dim();
  const int32_t Di = cfg.ssm_inner, C = cfg.ssm_conv_dim(), Kc = cfg.ssm_conv_kernel, r = H / G;
  if (conv_in != nullptr && conv_in != conv_state)  // small: [C][Kc-1]
    std::copy_n(conv_in, static_cast<size_t>(C) * (Kc - 1), conv_state);
  if (ssm_in == ssm_state) ssm_in = nullptr;
  if (T <= 0) {
    if (ssm_in != nullptr) std::copy_n(ssm_in, static_cast<size_t>(H) * P * N, ssm_state);
    return;
  }
  thread_local ScratchBuffer<float> u_buf, dt_buf, da_buf;
  float* u = u_buf.Get(static_cast<size_t>(T) * C);    // [T][C] conv output -> + bias -> silu: x | B | C
  float* dt = dt_buf.Get(static_cast<size_t>(T) * H);  // [T][H] softplus(dt + dt_bias)
  float* dA = da_buf.Get(static_cast<size_t>(T) * H);  // [T][H] exp(dt·A)
  // Causal conv: channels are independent, tokens strictly in order.
  ParallelFor(
      pool, C,
      [&](int64_t c0, int64_t c1) {
        kernels::CausalConvRun(conv_state, w.conv, in.xbc, in.stride, T, c0, c1, Kc, u, C);
      },
      64);
  ParallelFor(pool, T, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      float* row = u + t * C;
      if (w.conv_bias != nullptr)
        for (int32_t c = 0; c < C; ++c) row[c] = row[c] + w.conv_bias[c];
      kernels::SiluInPlace(row, C);
      const float* d = in.dt + t * in.stride;
      for (int32_t h = 0; h < H; ++h) {
        const float sp = kernels::Softplus(d[h] + w.dt_bias[h]);
        dt[t * H + h] = sp;
        dA[t * H + h] = std::exp(sp * w.ssm_a[h]);
      }
    }
  });
  // Heads are independent, tokens strictly in order.
  ParallelFor(pool, H, [&](int64_t h0, int64_t h1) {
    thread_local std::vector<kernels::SsmToken> toks;
    toks.resize(static_cast<size_t>(T));
    for (int64_t h = h0; h < h1; ++h) {
      const int32_t g = static_cast<int32_t>(h) / r;
      for (int32_t t = 0; t < T; ++t) {
        const float* row = u + static_cast<int64_t>(t) * C;
        kernels::SsmToken& k = toks[static_cast<size_t>(t)];
        k.x = row + h * P;
        k.B = row + Di + g * N;
        k.C = row + Di + G * N + g * N;
        k.dt = dt[t * H + h];
        k.dA = dA[t * H + h];
        k.y = y != nullptr && t >= out_from ? y + static_cast<int64_t>(t - out_from) * Di + h * P : nullptr;
      }
      const int64_t so = h * static_cast<int64_t>(P) * N;
      kernels::SsmHeadSteps(ssm_state + so, toks, P, N, ssm_in != nullptr ? ssm_in + so : nullptr);
      for (int32_t t = out_from; y != nullptr && t < T; ++t) {  // D skip
        const kernels::SsmToken& k = toks[static_cast<size_t>(t)];
        for (int32_t p = 0; p < P; ++p) k.y[p] = k.y[p] + k.x[p] * w.ssm_d[h];
      }
    }
  });
}

void Mamba2Forward(const ModelConfig& cfg, const Mamba2Weights& w, int32_t rec_index, const float* t,
                   int32_t N, std::span<const SeqRun> seqs, StateStorage& states, ReplayLog* replay,
                   float* out, kernels::ThreadPool* pool) {
  const int32_t H = cfg.ssm_heads, G = cfg.ssm_group, Di = cfg.ssm_inner, C = cfg.ssm_conv_dim();
  const int64_t din = 2 * static_cast<int64_t>(Di) + 2 * cfg.ssm_key_dim() + H;
  thread_local ScratchBuffer<float> in_buf, y_buf;
  float* zx = in_buf.Get(static_cast<size_t>(N) * din);  // [N][z Di | x Di | B G·N | C G·N | dt H]
  kernels::MatMul(w.in, t, N, zx, pool);
  const RowPiece pieces[] = {{zx + Di, din, C + H}};  // replay row: raw xBC | dt (adjacent in the projection)
  if (replay != nullptr) RecordReplayRows(cfg, rec_index, seqs, pieces, replay);
  float* y = y_buf.Get(static_cast<size_t>(N) * Di);  // [N][Di]
  for (const SeqRun& s : seqs) {
    Mamba2Inputs in;
    in.xbc = zx + static_cast<int64_t>(s.row0) * din + Di;
    in.dt = in.xbc + C;
    in.stride = din;
    in.T = s.n;
    const int32_t P = s.prefix != nullptr ? s.prefix_rows : 0;
    if (P > 0) {  // lazy rollback: the logged rows, then this batch's, as one run in the replay-row layout
      in.xbc = JoinPrefixRows(cfg, rec_index, s, pieces);
      in.dt = in.xbc + C;
      in.stride = cfg.replay_row_floats();
      in.T = P + s.n;
    }
    const bool other = s.slot_in >= 0 && s.slot_in != s.slot;
    Mamba2Update(cfg, w, in, states.Conv(s.slot, rec_index), states.Delta(s.slot, rec_index),
                 y + static_cast<int64_t>(s.row0) * Di, pool,
                 other ? states.Conv(s.slot_in, rec_index) : nullptr,
                 other ? states.Delta(s.slot_in, rec_index) : nullptr, P);
  }
  // y · silu(z), then RMSNorm per group of Di / G channels.
  const int32_t gs = Di / G;
  ParallelFor(pool, N, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      float* yi = y + i * Di;
      kernels::MulSilu(yi, zx + i * din, Di);
      if (w.norm == nullptr) continue;
      for (int32_t g = 0; g < G; ++g)
        kernels::RmsNorm(yi + g * gs, w.norm + g * gs, gs, cfg.eps, yi + g * gs);
    }
  });
  kernels::MatMul(w.out, y, N, out, pool);
}

}  // namespace rw::model::internal
