// Expert dispatch shared by the MoE FFNs, and the sigmoid-routed MoE (llama.cpp v0.5.0 build_moe_ffn with
// LLAMA_EXPERT_GATING_FUNC_TYPE_SIGMOID and ffn_exp_probs_b): nemotron_h_moe (LLM_FFN_RELU_SQR, no gate, a shared
// expert), lfm2moe (SwiGLU experts, no shared expert) and kimi-linear (SwiGLU experts and shared expert).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "kernels/matmul.h"
#include "model/layers.h"

namespace rw::model::internal {

void RunExperts(int32_t N, int32_t K, int32_t X, int32_t E, const int32_t* sel, const float* wt,
                const float* t, float* out,
                const std::function<void(int32_t, const float*, int32_t, float*)>& expert) {
  std::vector<float> y(static_cast<size_t>(N) * K * E);  // [N][K][E] weighted expert outputs
  std::vector<float> xs, ys;
  for (int32_t e = 0; e < X; ++e) {
    std::vector<int32_t> slots;  // i·K + k
    for (int32_t j = 0; j < N * K; ++j)
      if (sel[j] == e) slots.push_back(j);
    if (slots.empty()) continue;
    const int32_t n = static_cast<int32_t>(slots.size());
    xs.resize(static_cast<size_t>(n) * E);
    for (int32_t r = 0; r < n; ++r)
      std::copy_n(t + static_cast<int64_t>(slots[r] / K) * E, E, xs.data() + static_cast<int64_t>(r) * E);
    ys.resize(static_cast<size_t>(n) * E);
    expert(e, xs.data(), n, ys.data());
    for (int32_t r = 0; r < n; ++r) {
      const float wk = wt[slots[r]];
      float* dst = y.data() + static_cast<int64_t>(slots[r]) * E;
      const float* src = ys.data() + static_cast<int64_t>(r) * E;
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
  kernels::MatMul(w.router, t, N, logits.data(), pool);
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
  RunExperts(N, K, X, E, sel.data(), wt.data(), t, out, [&](int32_t e, const float* xs, int32_t n, float* ys) {
    const Matrix up = RowSlice(w.up_exps, static_cast<int64_t>(e) * F, F);
    const Matrix down = RowSlice(w.down_exps, static_cast<int64_t>(e) * E, E);
    if (w.gate_exps.data != nullptr) {  // lfm2moe
      SwiGluFfn(RowSlice(w.gate_exps, static_cast<int64_t>(e) * F, F), up, down, xs, n, ys, pool);
    } else {
      ReluSqrFfn(up, down, xs, n, ys, pool);
    }
  });
  if (w.shexp_up.data == nullptr) return;  // lfm2moe: no shared expert
  std::vector<float> sh(static_cast<size_t>(N) * E);  // [N][E] shared expert: ReLU² or SwiGLU (kimi-linear)
  if (w.shexp_gate.data != nullptr) {
    SwiGluFfn(w.shexp_gate, w.shexp_up, w.shexp_down, t, N, sh.data(), pool);
  } else {
    ReluSqrFfn(w.shexp_up, w.shexp_down, t, N, sh.data(), pool);
  }
  for (size_t i = 0; i < sh.size(); ++i) out[i] = out[i] + sh[i];
}

}  // namespace rw::model::internal
