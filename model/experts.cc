// Expert dispatch shared by the MoE FFNs, and the sigmoid-routed MoE (llama.cpp v0.5.0 build_moe_ffn with
// LLAMA_EXPERT_GATING_FUNC_TYPE_SIGMOID and ffn_exp_probs_b): nemotron_h_moe (LLM_FFN_RELU_SQR, no gate, a shared
// expert), lfm2moe (SwiGLU experts, no shared expert) and kimi-linear (SwiGLU experts and shared expert).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "kernels/activation.h"
#include "kernels/matmul.h"
#include "model/layers.h"

namespace rw::model::internal {

kernels::MatMulJob FfnHiddenJob(const Matrix& gate, const Matrix& up, const float* x, int32_t n, float* h, float* u,
                                std::function<void(int64_t, int64_t)>* act) {
  const int64_t F = up.n_rows;
  kernels::MatMulJob job;
  job.x = x;
  job.n_tok = n;
  job.y = h;
  if (gate.data != nullptr) {
    job.w = gate;
    job.w2 = up;
    job.y2 = u;
    *act = [=](int64_t r0, int64_t r1) {
      for (int64_t i = 0; i < n; ++i) kernels::SwiGlu(h + i * F + r0, u + i * F + r0, r1 - r0, h + i * F + r0);
    };
  } else {
    job.w = up;
    *act = [=](int64_t r0, int64_t r1) {
      for (int64_t i = 0; i < n; ++i)
        for (int64_t r = r0; r < r1; ++r) {
          const float v = h[i * F + r] > 0.0f ? h[i * F + r] : 0.0f;
          h[i * F + r] = v * v;
        }
    };
  }
  job.rows_done = act;
  return job;
}

void RunExperts(int32_t N, int32_t K, int32_t X, int32_t E, const int32_t* sel, const float* wt, const float* t,
                float* out, const std::function<ExpertFfn(int32_t)>& expert,
                std::span<const kernels::MatMulJob> extra_down, kernels::ThreadPool* pool) {
  // Active experts in ascending order, each with its routed slots i·K + k.
  std::vector<std::vector<int32_t>> slots(X);
  for (int32_t j = 0; j < N * K; ++j) slots[sel[j]].push_back(j);
  std::vector<int32_t> active;
  std::vector<int64_t> row0;  // first gathered row of each active expert
  int64_t rows = 0, hidden = 0;
  std::vector<ExpertFfn> mats;
  for (int32_t e = 0; e < X; ++e) {
    if (slots[e].empty()) continue;
    active.push_back(e);
    row0.push_back(rows);
    mats.push_back(expert(e));
    hidden = std::max<int64_t>(hidden, mats.back().up.n_rows);
    rows += static_cast<int64_t>(slots[e].size());
  }
  const size_t A = active.size();
  std::vector<float> xs(static_cast<size_t>(rows) * E), ys(static_cast<size_t>(rows) * E);  // [rows][E]
  std::vector<float> h(static_cast<size_t>(rows) * hidden), u(h.size());                     // [rows][F]
  std::vector<kernels::MatMulJob> first(A), down(A);
  std::vector<std::function<void(int64_t, int64_t)>> acts(A);
  for (size_t a = 0; a < A; ++a) {
    const std::vector<int32_t>& sl = slots[active[a]];
    const int32_t n = static_cast<int32_t>(sl.size());
    float* xa = xs.data() + row0[a] * E;
    for (int32_t r = 0; r < n; ++r) std::copy_n(t + static_cast<int64_t>(sl[r] / K) * E, E, xa + static_cast<int64_t>(r) * E);
    const ExpertFfn& m = mats[a];
    float* ha = h.data() + row0[a] * m.up.n_rows;
    first[a] = FfnHiddenJob(m.gate, m.up, xa, n, ha, u.data() + row0[a] * m.up.n_rows, &acts[a]);
    down[a].w = m.down;
    down[a].x = ha;
    down[a].n_tok = n;
    down[a].y = ys.data() + row0[a] * E;
  }
  kernels::MatMulMany(first, pool);
  down.insert(down.end(), extra_down.begin(), extra_down.end());
  kernels::MatMulMany(down, pool);
  std::vector<float> y(static_cast<size_t>(N) * K * E);  // [N][K][E] weighted expert outputs
  for (size_t a = 0; a < A; ++a) {
    const std::vector<int32_t>& sl = slots[active[a]];
    for (size_t r = 0; r < sl.size(); ++r) {
      const float wk = wt[sl[r]];
      float* dst = y.data() + static_cast<int64_t>(sl[r]) * E;
      const float* src = ys.data() + (row0[a] + static_cast<int64_t>(r)) * E;
      for (int32_t d = 0; d < E; ++d) dst[d] = src[d] * wk;
    }
  }
  for (int64_t i = 0; i < N; ++i) {
    float* o = out + i * E;
    const float* yi = y.data() + i * K * E;
    for (int32_t d = 0; d < E; ++d) o[d] = yi[d];
    for (int32_t k = 1; k < K; ++k)
      for (int32_t d = 0; d < E; ++d) o[d] = o[d] + yi[static_cast<int64_t>(k) * E + d];
  }
}

void SigmoidMoeForward(const ModelConfig& cfg, const FfnWeights& w, const float* t, int32_t N, float* out,
                       kernels::ThreadPool* pool) {
  const int32_t E = cfg.n_embd, X = cfg.n_expert, K = cfg.n_expert_used, F = cfg.n_ff_exp;
  std::vector<float> logits(static_cast<size_t>(N) * X);  // [N][X]
  // Router and the shared expert's first product (ReLU² or SwiGLU: kimi-linear) in one region; its down product
  // joins the experts' down products.
  const bool shared = w.shexp_up.data != nullptr;  // lfm2moe: no shared expert
  const int64_t Fs = shared ? w.shexp_up.n_rows : 0;
  std::vector<float> sh(static_cast<size_t>(N) * E);                                // [N][E] shared expert output
  std::vector<float> sh_h(static_cast<size_t>(N) * Fs), sh_u(sh_h.size());          // [N][Fs]
  std::function<void(int64_t, int64_t)> sh_act;
  std::vector<kernels::MatMulJob> jobs(1);
  jobs[0].w = w.router;
  jobs[0].x = t;
  jobs[0].n_tok = N;
  jobs[0].y = logits.data();
  std::vector<kernels::MatMulJob> sh_down;
  if (shared) {
    jobs.push_back(FfnHiddenJob(w.shexp_gate, w.shexp_up, t, N, sh_h.data(), sh_u.data(), &sh_act));
    sh_down.resize(1);
    sh_down[0].w = w.shexp_down;
    sh_down[0].x = sh_h.data();
    sh_down[0].n_tok = N;
    sh_down[0].y = sh.data();
  }
  kernels::MatMulMany(jobs, pool);
  std::vector<int32_t> sel(static_cast<size_t>(N) * K), idx(X);  // [N][K] by descending biased score
  std::vector<float> wt(static_cast<size_t>(N) * K), score(X);   // [N][K]
  for (int32_t i = 0; i < N; ++i) {
    float* p = logits.data() + static_cast<int64_t>(i) * X;
    for (int32_t e = 0; e < X; ++e) {
      p[e] = 1.0f / (1.0f + std::exp(-p[e]));  // probabilities (weights come from these, unbiased)
      score[e] = w.exp_probs_b != nullptr ? p[e] + w.exp_probs_b[e] : p[e];
    }
    std::iota(idx.begin(), idx.end(), 0);
    std::stable_sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) { return score[a] > score[b]; });
    float s = 0.0f;
    for (int32_t k = 0; k < K; ++k) {
      sel[i * K + k] = idx[k];
      wt[i * K + k] = p[idx[k]];
      s += wt[i * K + k];
    }
    s = std::max(s, 6.103515625e-5f);
    for (int32_t k = 0; k < K; ++k) {
      if (cfg.expert_weights_norm) wt[i * K + k] /= s;
      if (cfg.expert_weights_scale != 0.0f && cfg.expert_weights_scale != 1.0f)
        wt[i * K + k] *= cfg.expert_weights_scale;
    }
  }
  RunExperts(N, K, X, E, sel.data(), wt.data(), t, out, [&](int32_t e) {
    ExpertFfn m;
    m.up = RowSlice(w.up_exps, static_cast<int64_t>(e) * F, F);
    m.down = RowSlice(w.down_exps, static_cast<int64_t>(e) * E, E);
    if (w.gate_exps.data != nullptr) m.gate = RowSlice(w.gate_exps, static_cast<int64_t>(e) * F, F);  // lfm2moe
    return m;
  }, sh_down, pool);
  if (!shared) return;
  for (size_t i = 0; i < sh.size(); ++i) out[i] = out[i] + sh[i];
}

}  // namespace rw::model::internal
