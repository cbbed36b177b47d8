// Gated DeltaNet layer (spec model-qwen35.md 7.4).
#include <cstring>
#include <vector>

#include "kernels/activation.h"
#include "kernels/alloc_tuning.h"
#include "kernels/conv.h"
#include "kernels/gdn.h"
#include "kernels/gdn_split.h"
#include "kernels/matmul.h"
#include "kernels/norm.h"
#include "model/layers.h"

namespace rw::model::internal {

using kernels::ParallelFor;
using kernels::ScratchBuffer;

void GdnUpdate(const ModelConfig& cfg, const GdnWeights& w, const GdnInputs& in, float* conv_state,
               float* delta_state, float* o, kernels::ThreadPool* pool, const float* conv_in,
               const float* delta_in, int32_t out_from) {
  const int32_t T = in.T, S = cfg.ssm_state, Hv = cfg.ssm_heads;
  const int32_t C = cfg.ssm_conv_dim(), Kc = cfg.ssm_conv_kernel;
  if (conv_in != nullptr && conv_in != conv_state)  // small: [C][Kc-1]
    std::memcpy(conv_state, conv_in, sizeof(float) * static_cast<size_t>(C) * (Kc - 1));
  if (delta_in == delta_state) delta_in = nullptr;
  if (T <= 0) {
    if (delta_in != nullptr) std::memcpy(delta_state, delta_in, sizeof(float) * static_cast<size_t>(Hv) * S * S);
    return;
  }
  thread_local ScratchBuffer<float> u_buf, beta_buf, g_buf;
  float* u = u_buf.Get(static_cast<size_t>(T) * C);        // [T][C] conv output -> silu -> q, k L2-normalised
  float* beta = beta_buf.Get(static_cast<size_t>(T) * Hv);  // [T][Hv]
  float* g = g_buf.Get(static_cast<size_t>(T) * Hv);        // [T][Hv]
  // 3. causal conv: channels are independent, tokens strictly in order.
  ParallelFor(pool, C, [&](int64_t c0, int64_t c1) {
    kernels::CausalConvRun(conv_state, w.conv, in.qkv, in.qkv_stride, T, c0, c1, Kc, u, C);
  }, 64);
  // 2 + 4. gates, silu, L2 norm: per token.
  ParallelFor(pool, T, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      float* row = u + t * C;
      // A row without output (replay: t < out_from, or no o) never reads its q: skip it.
      ActivateQkvRow(cfg, row, o != nullptr && t >= out_from);
      const float* b = in.b + t * in.ba_stride;
      const float* a = in.a + t * in.ba_stride;
      for (int32_t h = 0; h < Hv; ++h) {
        beta[t * Hv + h] = kernels::Sigmoid(b[h]);
        g[t * Hv + h] = kernels::Softplus(a[h] + w.dt_bias[h]) * w.ssm_a[h];
      }
    }
  });
  // 5. delta rule: heads are independent, tokens strictly in order.
  DeltaRuleHeads(cfg, u, T, beta, g, nullptr, delta_state, delta_in, o, out_from, pool);
}

void ActivateQkvRow(const ModelConfig& cfg, float* row, bool q_used) {
  const int32_t S = cfg.ssm_state, Hk = cfg.ssm_group, Kd = cfg.ssm_key_dim(), C = cfg.ssm_conv_dim();
  if (q_used) kernels::SiluInPlace(row, C);
  else kernels::SiluInPlace(row + Kd, C - Kd);
  for (int32_t j = 0; j < Hk; ++j) {
    if (q_used) kernels::L2Norm(row + j * S, S, cfg.eps, row + j * S);
    kernels::L2Norm(row + Kd + j * S, S, cfg.eps, row + Kd + j * S);
  }
}

void DeltaRuleHeads(const ModelConfig& cfg, const float* u, int32_t T, const float* beta, const float* g,
                    const float* dec, float* delta_state, const float* delta_in, float* o, int32_t out_from,
                    kernels::ThreadPool* pool) {
  const int32_t S = cfg.ssm_state, Hv = cfg.ssm_heads, Kd = cfg.ssm_key_dim(), Vd = cfg.ssm_inner;
  const int64_t C = cfg.ssm_conv_dim();
  // (GdnHeadSteps runs a block of state rows through all T tokens while it is in L1: same bits as token by token.)
  // Units are (head, part of its state rows): one part per head unless the pool has more threads than heads,
  // then enough parts (of >= kGdnRowBlock rows each) to give every thread work; rows are independent.
  const int32_t nt = pool != nullptr ? pool->size() : 1;
  int32_t parts = 1;
  while (Hv * parts < nt && S / (parts * 2) >= kernels::kGdnRowBlock) parts *= 2;
  ParallelFor(pool, static_cast<int64_t>(Hv) * parts, [&](int64_t u0, int64_t u1) {
    thread_local std::vector<kernels::GdnToken> toks;
    toks.resize(static_cast<size_t>(T));
    for (int64_t unit = u0; unit < u1; ++unit) {
      const int64_t h = unit / parts, part = unit % parts;
      const int32_t kh = cfg.KeyHead(static_cast<int32_t>(h));
      for (int32_t t = 0; t < T; ++t) {
        const float* row = u + t * C;
        kernels::GdnToken& x = toks[static_cast<size_t>(t)];
        x.q = row + kh * S;
        x.k = row + Kd + kh * S;
        x.v = row + 2 * Kd + h * S;
        x.beta = beta[t * Hv + h];
        x.g = dec != nullptr ? 0.0f : g[t * Hv + h];
        x.decay = dec != nullptr ? dec + static_cast<int64_t>(t) * Vd + h * S : nullptr;
        x.o = o && t >= out_from ? o + static_cast<int64_t>(t - out_from) * Vd + h * S : nullptr;
      }
      const int32_t j0 = static_cast<int32_t>(S * part / parts), j1 = static_cast<int32_t>(S * (part + 1) / parts);
      kernels::GdnHeadStepsRows(delta_state + h * S * S, toks, S, delta_in != nullptr ? delta_in + h * S * S : nullptr,
                                j0, j1);
    }
  });
}

void GdnForward(const ModelConfig& cfg, const GdnWeights& w, int32_t gdn_index, const float* t, int32_t N,
                std::span<const SeqRun> seqs, StateStorage& states, ReplayLog* replay, float* out,
                kernels::ThreadPool* pool) {
  const int32_t S = cfg.ssm_state, Hk = cfg.ssm_group, Hv = cfg.ssm_heads, r = Hv / Hk;
  const int32_t Kd = cfg.ssm_key_dim(), Vd = cfg.ssm_inner, C = cfg.ssm_conv_dim();
  thread_local ScratchBuffer<float> qkv_buf, z_buf, b_buf, a_buf, in_buf, ba_buf, o_buf;
  float* qkv = qkv_buf.Get(static_cast<size_t>(N) * C);  // [N][C]
  float* z = z_buf.Get(static_cast<size_t>(N) * Vd);     // [N][Vd]
  float* b = b_buf.Get(static_cast<size_t>(N) * Hv);     // [N][Hv]
  float* a = a_buf.Get(static_cast<size_t>(N) * Hv);     // [N][Hv]
  // 1. projections, in one region: in (legacy) or qkv and z, then ba or b and a.
  const int32_t W = 2 * Kd + 2 * Vd;
  float* in = w.legacy_in ? in_buf.Get(static_cast<size_t>(N) * W) : nullptr;  // [N][Hk groups of (q S, k S, v rS, z rS)]
  float* ba = cfg.arch == Arch::kQwen3Next ? ba_buf.Get(static_cast<size_t>(N) * 2 * Hv) : nullptr;  // [N][Hk groups of (b r, a r)]
  std::vector<kernels::MatMulJob> proj;
  if (in != nullptr) {
    proj.push_back(kernels::Product(w.in, t, N, in));
  } else {
    proj.push_back(kernels::Product(w.qkv, t, N, qkv));
    proj.push_back(kernels::Product(w.gate, t, N, z));
  }
  if (ba != nullptr) {
    proj.push_back(kernels::Product(w.ba, t, N, ba));
  } else {
    proj.push_back(kernels::Product(w.beta, t, N, b));
    proj.push_back(kernels::Product(w.alpha, t, N, a));
  }
  kernels::MatMulMany(proj, pool);
  if (in != nullptr)
    for (int32_t i = 0; i < N; ++i)
      kernels::SplitQkvzRow(in + static_cast<int64_t>(i) * W, S, Hk, r, qkv + static_cast<int64_t>(i) * C,
                            z + static_cast<int64_t>(i) * Vd);
  if (ba != nullptr)
    for (int32_t i = 0; i < N; ++i)
      kernels::SplitBaRow(ba + static_cast<int64_t>(i) * 2 * Hv, Hk, r, b + i * Hv, a + i * Hv);
  // Replay log: the raw inputs of the state update, for the whole run from the start state (a replay prefix's
  // rows first).
  const RowPiece pieces[] = {{qkv, C, C}, {b, Hv, Hv}, {a, Hv, Hv}};
  if (replay != nullptr) RecordReplayRows(cfg, gdn_index, seqs, pieces, replay);
  // 2-5. state update per sequence.
  float* o = o_buf.Get(static_cast<size_t>(N) * Vd);  // [N][Vd] core output
  for (const SeqRun& s : seqs) {
    GdnInputs in;
    in.qkv = qkv + static_cast<int64_t>(s.row0) * C;
    in.qkv_stride = C;
    in.b = b + static_cast<int64_t>(s.row0) * Hv;
    in.a = a + static_cast<int64_t>(s.row0) * Hv;
    in.ba_stride = Hv;
    in.T = s.n;
    const int32_t P = s.prefix != nullptr ? s.prefix_rows : 0;
    if (P > 0) {
      // Lazy rollback: the logged rows [0, P) of the earlier batch, then this batch's rows, as one run of
      // P + n tokens in the replay log's row layout [C | b | a].
      const int64_t rw = C + 2 * Hv;
      const float* rows = JoinPrefixRows(cfg, gdn_index, s, pieces);
      in.qkv = rows;
      in.qkv_stride = rw;
      in.b = rows + C;
      in.a = rows + C + Hv;
      in.ba_stride = rw;
      in.T = P + s.n;
    }
    const bool other = s.slot_in >= 0 && s.slot_in != s.slot;
    GdnUpdate(cfg, w, in, states.Conv(s.slot, gdn_index), states.Delta(s.slot, gdn_index),
              o + static_cast<int64_t>(s.row0) * Vd, pool, other ? states.Conv(s.slot_in, gdn_index) : nullptr,
              other ? states.Delta(s.slot_in, gdn_index) : nullptr, P);
  }
  // 6. gated RMSNorm per head, output projection.
  ParallelFor(pool, N, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      for (int32_t h = 0; h < Hv; ++h) {
        float* oh = o + i * Vd + h * S;
        const float* zh = z + i * Vd + h * S;
        kernels::RmsNorm(oh, w.norm, S, cfg.eps, oh);
        kernels::MulSilu(oh, zh, S);
      }
    }
  });
  kernels::MatMul(w.out, o, N, out, pool);
}

}  // namespace rw::model::internal
