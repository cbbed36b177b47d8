// Dense SwiGLU FFN (spec 7.5) and the softmax-routed MoE FFN with a gated shared expert (spec 7.6; Granite 4.0-H:
// the same MoE, its shared expert ungated). A token's output depends on
// that token alone: experts multiply the gathered rows of the tokens routed to them, one dot product per output
// element, so which other tokens share an expert does not change any bit.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "kernels/activation.h"
#include "kernels/alloc_tuning.h"
#include "kernels/matmul.h"
#include "model/layers.h"

namespace rw::model::internal {

using kernels::ParallelFor;

void SwiGluFfn(const Matrix& gate, const Matrix& up, const Matrix& down, const float* x, int32_t N, float* out,
               kernels::ThreadPool* pool) {
  const int64_t F = gate.n_rows;
  thread_local kernels::ScratchBuffer<float> g_buf, u_buf;
  float* g = g_buf.Get(static_cast<size_t>(N) * F);  // [N][F]
  float* u = u_buf.Get(static_cast<size_t>(N) * F);  // [N][F]
  kernels::MatMul(gate, x, N, g, pool);
  kernels::MatMul(up, x, N, u, pool);
  kernels::SwiGlu(g, u, static_cast<int64_t>(N) * F, g);
  kernels::MatMul(down, g, N, out, pool);
}

// nemotron_h MLP: down · relu(up · x)².
void ReluSqrFfn(const Matrix& up, const Matrix& down, const float* x, int32_t N, float* out,
                kernels::ThreadPool* pool) {
  const int64_t n = static_cast<int64_t>(N) * up.n_rows;
  thread_local kernels::ScratchBuffer<float> u_buf;
  float* u = u_buf.Get(static_cast<size_t>(n));  // [N][F]
  kernels::MatMul(up, x, N, u, pool);
  for (int64_t i = 0; i < n; ++i) {
    const float r = u[i] > 0.0f ? u[i] : 0.0f;
    u[i] = r * r;
  }
  kernels::MatMul(down, u, N, out, pool);
}

void FfnForward(const ModelConfig& cfg, const FfnWeights& w, const float* t, int32_t N, float* out,
                kernels::ThreadPool* pool) {
  if (cfg.sigmoid_moe() && w.router.data != nullptr) return SigmoidMoeForward(cfg, w, t, N, out, pool);
  if (cfg.is_nemotron()) {
    ReluSqrFfn(w.up, w.down, t, N, out, pool);
    return;
  }
  if (!cfg.softmax_moe()) {
    SwiGluFfn(w.gate, w.up, w.down, t, N, out, pool);
    return;
  }
  const int32_t E = cfg.n_embd, X = cfg.n_expert, K = cfg.n_expert_used, F = cfg.n_ff_exp;
  // Router: softmax over all experts, top-k, renormalise.
  std::vector<float> logits(static_cast<size_t>(N) * X);  // [N][X]
  kernels::MatMul(w.router, t, N, logits.data(), pool);
  std::vector<int32_t> sel(static_cast<size_t>(N) * K);   // [N][K] descending probability
  std::vector<float> wt(static_cast<size_t>(N) * K);      // [N][K]
  for (int32_t i = 0; i < N; ++i) {
    float* l = logits.data() + static_cast<int64_t>(i) * X;
    float mx = -INFINITY;
    for (int32_t e = 0; e < X; ++e) mx = std::max(mx, l[e]);
    double sum = 0.0;
    for (int32_t e = 0; e < X; ++e) {
      l[e] = std::exp(l[e] - mx);
      sum += l[e];
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (int32_t e = 0; e < X; ++e) l[e] *= inv;
    std::vector<int32_t> idx(X);
    std::iota(idx.begin(), idx.end(), 0);
    std::stable_sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) { return l[a] > l[b]; });
    float s = 0.0f;
    for (int32_t k = 0; k < K; ++k) {
      sel[i * K + k] = idx[k];
      wt[i * K + k] = l[idx[k]];
      s += wt[i * K + k];
    }
    s = std::max(s, 6.103515625e-5f);
    for (int32_t k = 0; k < K; ++k) wt[i * K + k] /= s;
  }
  // Experts over the gathered rows routed to them, summed in k order into out.
  RunExperts(N, K, X, E, sel.data(), wt.data(), t, out, [&](int32_t e, const float* xs, int32_t n, float* ys) {
    const Matrix down = RowSlice(w.down_exps, static_cast<int64_t>(e) * E, E);
    if (w.fused_gate_up) {
      const Matrix gu = RowSlice(w.gate_up_exps, static_cast<int64_t>(e) * 2 * F, 2 * F);
      std::vector<float> h(static_cast<size_t>(n) * 2 * F), a(static_cast<size_t>(n) * F);
      kernels::MatMul(gu, xs, n, h.data(), pool);
      for (int32_t r = 0; r < n; ++r)
        kernels::SwiGlu(h.data() + static_cast<int64_t>(r) * 2 * F, h.data() + static_cast<int64_t>(r) * 2 * F + F, F,
                        a.data() + static_cast<int64_t>(r) * F);
      kernels::MatMul(down, a.data(), n, ys, pool);
    } else {
      SwiGluFfn(RowSlice(w.gate_exps, static_cast<int64_t>(e) * F, F), RowSlice(w.up_exps, static_cast<int64_t>(e) * F, F),
                down, xs, n, ys, pool);
    }
  });
  if (w.shexp_gate.data == nullptr) return;  // Granite without a shared expert
  // Shared expert: gated by one scalar per token (Qwen) or added as it is (Granite).
  std::vector<float> sh(static_cast<size_t>(N) * E), sg(N);  // [N][E], [N]
  SwiGluFfn(w.shexp_gate, w.shexp_up, w.shexp_down, t, N, sh.data(), pool);
  if (w.shexp_gate_inp.data == nullptr) {
    for (size_t i = 0; i < sh.size(); ++i) out[i] = out[i] + sh[i];
    return;
  }
  kernels::MatMul(w.shexp_gate_inp, t, N, sg.data(), pool);
  ParallelFor(pool, N, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      float* o = out + i * E;
      const float gs = kernels::Sigmoid(sg[i]);
      for (int32_t d = 0; d < E; ++d) o[d] = o[d] + sh[i * E + d] * gs;
    }
  });
}

}  // namespace rw::model::internal
