// Multi-head latent attention of kimi-linear (llama.cpp v0.5.0 llama_model_kimi_linear's MLA branch with the
// split kv_b, "MLA KV cache enabled"), in the absorbed form and without RoPE:
//   latent = RMSNorm(kv_a · x)[0, R) | k_pe = (kv_a · x)[R, R + n_rot)   -> cached, one row of R + n_rot per token
//   q_h = [k_b_h · q_nope_h (R) | q_pe_h (n_rot)]                       -> softmax(q_h · row / sqrt(mla_k))
//   o_h = v_b_h · (attention-weighted rows)[0, R);  out = wo · [o_0 | ... | o_{H-1}].
// The KV storage has one K and one V row width, so the latent row is stored twice (as K and as V): twice
// llama.cpp's bytes, but pages, checkpoints and the persist formats stay as they are.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/alloc_tuning.h"
#include "kernels/kv_quant.h"
#include "kernels/matmul.h"
#include "kernels/norm.h"
#include "model/layers.h"

namespace rw::model::internal {

using kernels::ParallelFor;
using kernels::ScratchBuffer;

void MlaForward(const ModelConfig& cfg, const MlaWeights& w, int32_t attn_index, const float* t, int32_t N,
                std::span<const SeqRun> seqs, KvStorage& kv, float* out, kernels::ThreadPool* pool) {
  const int32_t H = cfg.n_head, R = cfg.kv_lora_rank, rope = cfg.n_rot, nope = cfg.mla_k - rope;
  const int32_t Dq = cfg.mla_k, Vh = cfg.mla_v, D = cfg.head_dim;  // D = R + rope: the cached row
  const KvTypes types = kv.config().type;
  const int32_t rot_k = kernels::KvRotationSize(types.k, D, true);
  const int32_t rot_v = kernels::KvRotationSize(types.v, D, false);
  thread_local ScratchBuffer<float> qf_buf, kv_buf, q_buf, g_buf, a_buf, att_buf, o_buf;
  float* qf = qf_buf.Get(static_cast<size_t>(N) * H * Dq);  // [N][H][nope | rope]
  float* lat = kv_buf.Get(static_cast<size_t>(N) * D);      // [N][latent R | k_pe rope]
  kernels::MatMul(w.q, t, N, qf, pool);
  kernels::MatMul(w.kv_a, t, N, lat, pool);
  const std::vector<int32_t> row_pos = RowPositions(seqs, N);
  // The cached rows (K, and V rotated separately when its cache type asks for it).
  for (const SeqRun& s : seqs)
    ParallelFor(pool, s.n, [&](int64_t j0, int64_t j1) {
      std::vector<float> k(D), v(D);
      for (int64_t j = j0; j < j1; ++j) {
        float* row = lat + (s.row0 + j) * D;
        kernels::RmsNorm(row, w.kv_a_norm, R, cfg.eps, row);
        std::memcpy(k.data(), row, D * sizeof(float));
        std::memcpy(v.data(), row, D * sizeof(float));
        if (rot_k > 0) kernels::HadamardRotate(k.data(), D, rot_k);
        if (rot_v > 0) kernels::HadamardRotate(v.data(), D, rot_v);
        StoreKvRow(kv, attn_index, s, s.pos0 + static_cast<int32_t>(j), k.data(), v.data());
      }
    });
  // Absorbed queries [N][H][D]: k_b_h · q_nope_h, then q_pe.
  float* q = q_buf.Get(static_cast<size_t>(N) * H * D);
  float* gath = g_buf.Get(static_cast<size_t>(N) * std::max(nope, R));  // one head's rows, gathered
  float* prod = a_buf.Get(static_cast<size_t>(N) * std::max(R, Vh));     // one head's product
  for (int32_t h = 0; h < H; ++h) {
    for (int32_t i = 0; i < N; ++i)
      std::memcpy(gath + static_cast<int64_t>(i) * nope, qf + (static_cast<int64_t>(i) * H + h) * Dq,
                  nope * sizeof(float));
    kernels::MatMul(RowSlice(w.k_b, static_cast<int64_t>(h) * R, R), gath, N, prod, pool);
    for (int32_t i = 0; i < N; ++i) {
      float* qh = q + (static_cast<int64_t>(i) * H + h) * D;
      std::memcpy(qh, prod + static_cast<int64_t>(i) * R, R * sizeof(float));
      std::memcpy(qh + R, qf + (static_cast<int64_t>(i) * H + h) * Dq + nope, rope * sizeof(float));
      if (rot_k > 0) kernels::HadamardRotate(qh, D, rot_k);
    }
  }
  float* att = att_buf.Get(static_cast<size_t>(N) * H * D);  // [N][H][D]
  AttendRows(q, H, 1, D, 1.0f / std::sqrt(static_cast<float>(Dq)), attn_index, seqs, row_pos, kv, att, pool);
  // Per head: back from the rotated V space, the latent part through v_b_h.
  float* o = o_buf.Get(static_cast<size_t>(N) * H * Vh);  // [N][H·Vh]
  for (int32_t h = 0; h < H; ++h) {
    for (int32_t i = 0; i < N; ++i) {
      float* ah = att + (static_cast<int64_t>(i) * H + h) * D;
      if (rot_v > 0) kernels::HadamardRotate(ah, D, rot_v);
      std::memcpy(gath + static_cast<int64_t>(i) * R, ah, R * sizeof(float));
    }
    kernels::MatMul(RowSlice(w.v_b, static_cast<int64_t>(h) * Vh, Vh), gath, N, prod, pool);
    for (int32_t i = 0; i < N; ++i)
      std::memcpy(o + static_cast<int64_t>(i) * H * Vh + h * Vh, prod + static_cast<int64_t>(i) * Vh,
                  Vh * sizeof(float));
  }
  kernels::MatMul(w.out, o, N, out, pool);
}

}  // namespace rw::model::internal
