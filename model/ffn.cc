// Dense SwiGLU FFN (spec 7.5) and the softmax-routed MoE FFN with a gated shared expert (spec 7.6; Granite 4.0-H:
// the same MoE, its shared expert ungated). A token's output depends on
// that token alone: experts multiply the gathered rows of the tokens routed to them, one dot product per output
// element, so which other tokens share an expert does not change any bit.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/activation.h"
#include "kernels/alloc_tuning.h"
#include "kernels/matmul.h"
#include "kernels/moe_route.h"
#include "model/layers.h"

namespace rw::model::internal {

using kernels::ParallelFor;

void SwiGluFfn(const Matrix& gate, const Matrix& up, const Matrix& down, const float* x, int32_t N, float* out,
               kernels::ThreadPool* pool) {
  const int64_t F = gate.n_rows;
  thread_local kernels::ScratchBuffer<float> g_buf, u_buf;
  float* g = g_buf.Get(static_cast<size_t>(N) * F);  // [N][F]
  float* u = u_buf.Get(static_cast<size_t>(N) * F);  // [N][F]
  // Gate and up in one region, each thread applying SwiGLU to the rows it computed.
  const std::function<void(int64_t, int64_t)> act = [&](int64_t r0, int64_t r1) {
    for (int64_t i = 0; i < N; ++i) kernels::SwiGlu(g + i * F + r0, u + i * F + r0, r1 - r0, g + i * F + r0);
  };
  kernels::MatMulJob gu = kernels::Product(gate, x, N, g);
  gu.w2 = up;
  gu.y2 = u;
  gu.rows_done = &act;
  kernels::MatMulMany({&gu, 1}, pool);
  kernels::MatMul(down, g, N, out, pool);
}

// nemotron_h MLP: down · relu(up · x)².
void ReluSqrFfn(const Matrix& up, const Matrix& down, const float* x, int32_t N, float* out,
                kernels::ThreadPool* pool) {
  thread_local kernels::ScratchBuffer<float> u_buf;
  float* u = u_buf.Get(static_cast<size_t>(N) * up.n_rows);  // [N][F]
  std::function<void(int64_t, int64_t)> act;
  const kernels::MatMulJob job = FfnHiddenJob(Matrix{}, up, x, N, u, nullptr, &act);
  kernels::MatMulMany({&job, 1}, pool);
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
  // Router: softmax over all experts, top-k, renormalise. In the router's region: the shared expert's first
  // product and its gate (Qwen); its down product joins the experts' down products.
  std::vector<float> logits(static_cast<size_t>(N) * X);  // [N][X]
  const bool shared = w.shexp_gate.data != nullptr;       // Granite: none
  const int64_t Fs = shared ? w.shexp_up.n_rows : 0;
  std::vector<float> sh(static_cast<size_t>(N) * E), sg(N);                // [N][E], [N]
  std::vector<float> sh_h(static_cast<size_t>(N) * Fs), sh_u(sh_h.size());  // [N][Fs]
  std::function<void(int64_t, int64_t)> sh_act;
  std::vector<kernels::MatMulJob> jobs(1), sh_down;
  jobs[0] = kernels::Product(w.router, t, N, logits.data());
  if (shared) {
    jobs.push_back(FfnHiddenJob(w.shexp_gate, w.shexp_up, t, N, sh_h.data(), sh_u.data(), &sh_act));
    if (w.shexp_gate_inp.data != nullptr) jobs.push_back(kernels::Product(w.shexp_gate_inp, t, N, sg.data()));
    sh_down.push_back(kernels::Product(w.shexp_down, sh_h.data(), N, sh.data()));
  }
  kernels::MatMulMany(jobs, pool);
  std::vector<int32_t> sel(static_cast<size_t>(N) * K);   // [N][K] descending probability
  std::vector<float> wt(static_cast<size_t>(N) * K);      // [N][K]
  for (int32_t i = 0; i < N; ++i)
    kernels::SoftmaxTopK(logits.data() + static_cast<int64_t>(i) * X, X, K, sel.data() + i * K, wt.data() + i * K);
  // Experts over the gathered rows routed to them, summed in k order into out.
  RunExperts(N, K, X, E, sel.data(), wt.data(), t, out, [&](int32_t e) {
    ExpertFfn m;
    m.down = RowSlice(w.down_exps, static_cast<int64_t>(e) * E, E);
    if (w.fused_gate_up) {
      m.gate = RowSlice(w.gate_up_exps, static_cast<int64_t>(e) * 2 * F, F);
      m.up = RowSlice(w.gate_up_exps, static_cast<int64_t>(e) * 2 * F + F, F);
    } else {
      m.gate = RowSlice(w.gate_exps, static_cast<int64_t>(e) * F, F);
      m.up = RowSlice(w.up_exps, static_cast<int64_t>(e) * F, F);
    }
    return m;
  }, sh_down, pool);
  if (!shared) return;  // Granite without a shared expert
  // Shared expert: gated by one scalar per token (Qwen) or added as it is (Granite).
  if (w.shexp_gate_inp.data == nullptr) {
    for (size_t i = 0; i < sh.size(); ++i) out[i] = out[i] + sh[i];
    return;
  }
  ParallelFor(pool, N, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      float* o = out + i * E;
      const float gs = kernels::Sigmoid(sg[i]);
      for (int32_t d = 0; d < E; ++d) o[d] = o[d] + sh[i * E + d] * gs;
    }
  });
}

}  // namespace rw::model::internal
