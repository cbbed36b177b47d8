// LFM2 gated short convolution (llama.cpp v0.5.0 llama_model_lfm2 build_shortconv_block, ggml_ssm_conv):
//   [B | C | x] = in_proj · h;  bx = B ⊙ x;  u_t[c] = Σ_{i<L} w[c][i] · [window[c] | bx_t[c]][i];  y = C ⊙ u;
//   out = out_proj · y.
// The state is the conv window alone (the last L-1 bx rows per channel, oldest first). The window moves
// strictly token by token (kernels::CausalConvRun, fixed order of the L products) in a prompt as in decoding,
// so any split gives the same bits (I1); the replay log keeps the bx row of each token, all a replay needs.
#include <algorithm>

#include "kernels/alloc_tuning.h"
#include "kernels/conv.h"
#include "kernels/matmul.h"
#include "model/layers.h"

namespace rw::model::internal {

using kernels::ParallelFor;
using kernels::ScratchBuffer;

void ShortConvUpdate(const ModelConfig& cfg, const ShortConvWeights& w, const float* bx, int64_t stride,
                     int32_t T, float* conv_state, float* u, kernels::ThreadPool* pool, const float* conv_in,
                     int32_t out_from) {
  const int32_t E = cfg.ssm_conv_dim(), Kc = cfg.ssm_conv_kernel;
  if (conv_in != nullptr && conv_in != conv_state)  // small: [E][Kc-1]
    std::copy_n(conv_in, static_cast<size_t>(E) * (Kc - 1), conv_state);
  if (T <= 0) return;
  // Rows of tokens before out_from (a replay prefix) go to a scratch buffer that nobody reads.
  thread_local ScratchBuffer<float> skip_buf;
  float* y = u;
  if (u != nullptr && out_from > 0) {
    y = skip_buf.Get(static_cast<size_t>(T) * E);  // [T][E]
  }
  ParallelFor(
      pool, E,
      [&](int64_t c0, int64_t c1) {
        kernels::CausalConvRun(conv_state, w.conv, bx, stride, T, c0, c1, Kc, y, E);
      },
      64);
  if (u != nullptr && out_from > 0)
    std::copy_n(y + static_cast<int64_t>(out_from) * E, static_cast<size_t>(T - out_from) * E, u);
}

void ShortConvForward(const ModelConfig& cfg, const ShortConvWeights& w, int32_t rec_index, const float* t,
                      int32_t N, std::span<const SeqRun> seqs, StateStorage& states, ReplayLog* replay,
                      float* out, kernels::ThreadPool* pool) {
  const int32_t E = cfg.n_embd;
  thread_local ScratchBuffer<float> in_buf, bx_buf, u_buf;
  float* bcx = in_buf.Get(static_cast<size_t>(N) * 3 * E);  // [N][B E | C E | x E]
  float* bx = bx_buf.Get(static_cast<size_t>(N) * E);       // [N][E] B ⊙ x
  float* u = u_buf.Get(static_cast<size_t>(N) * E);         // [N][E] conv output, then C ⊙ it
  kernels::MatMul(w.in, t, N, bcx, pool);
  ParallelFor(pool, N, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const float* row = bcx + i * 3 * E;
      for (int32_t c = 0; c < E; ++c) bx[i * E + c] = row[c] * row[2 * E + c];
    }
  });
  const RowPiece pieces[] = {{bx, E, E}};
  if (replay != nullptr) RecordReplayRows(cfg, rec_index, seqs, pieces, replay);
  for (const SeqRun& s : seqs) {
    const float* rows = bx + static_cast<int64_t>(s.row0) * E;
    int32_t T = s.n;
    const int32_t P = s.prefix != nullptr ? s.prefix_rows : 0;
    if (P > 0) {  // lazy rollback: the logged rows, then this batch's
      rows = JoinPrefixRows(cfg, rec_index, s, pieces);
      T = P + s.n;
    }
    const bool other = s.slot_in >= 0 && s.slot_in != s.slot;
    ShortConvUpdate(cfg, w, rows, E, T, states.Conv(s.slot, rec_index), u + static_cast<int64_t>(s.row0) * E,
                    pool, other ? states.Conv(s.slot_in, rec_index) : nullptr, P);
  }
  ParallelFor(pool, N, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const float* c = bcx + i * 3 * E + E;
      for (int32_t d = 0; d < E; ++d) u[i * E + d] = c[d] * u[i * E + d];
    }
  });
  kernels::MatMul(w.out, u, N, out, pool);
}

}  // namespace rw::model::internal
