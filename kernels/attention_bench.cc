// Attention over a long KV cache per cache type: one layer's decode attention (AttendGroup, 4 query heads per
// KV head, D 256, 2 KV heads: the Qwen3.5 shape) over N cached positions, one thread, types interleaved, best
// of 15. Usage: build/kernels/attention_bench [N=16384]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "kernels/attention.h"
#include "kernels/kv_quant.h"
using namespace rw::kernels;
int main(int argc, char** argv) {
  const int D = 256, Hkv = 2, W = D * Hkv, page = 32, G = 4;
  const int n = argc > 1 ? std::max(page, std::atoi(argv[1]) / page * page) : 16384;
  std::mt19937 rng(1);
  std::normal_distribution<float> dist;
  std::vector<float> row(W);
  struct Cache {
    std::vector<std::vector<uint8_t>> k, v;
    std::vector<const uint8_t*> kp, vp;
    KvPages view;
  };
  auto make = [&](KvType t) {
    Cache c;
    size_t rb = KvRowBytes(t, W);
    for (int p = 0; p < n / page; ++p) {
      c.k.emplace_back(page * rb);
      c.v.emplace_back(page * rb);
      for (int r = 0; r < page; ++r) {
        for (auto& x : row) x = dist(rng);
        QuantizeKvRow(t, row.data(), c.k.back().data() + r * rb, W);
        for (auto& x : row) x = dist(rng);
        QuantizeKvRow(t, row.data(), c.v.back().data() + r * rb, W);
      }
    }
    for (auto& p : c.k) c.kp.push_back(p.data());
    for (auto& p : c.v) c.vp.push_back(p.data());
    c.view = {c.kp.data(), c.vp.data(), page, W, t, t};
    return c;
  };
  Cache f16 = make(KvType::kF16), q8 = make(KvType::kQ8_0), q4 = make(KvType::kQ4_0);
  std::vector<float> q(G * D), out(G * D);
  for (auto& x : q) x = dist(rng);
  AttendQuery qs[G];
  for (int j = 0; j < G; ++j) qs[j] = {q.data() + j * D, out.data() + j * D, n};
  double best[3] = {1e9, 1e9, 1e9};
  Cache* cs[3] = {&f16, &q8, &q4};
  for (int it = 0; it < 15; ++it)
    for (int c = 0; c < 3; ++c) {
      auto t0 = std::chrono::steady_clock::now();
      for (int h = 0; h < Hkv; ++h) AttendGroup(qs, G, D, h, cs[c]->view, 0.0625f);
      double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      best[c] = std::min(best[c], dt);
    }
  std::printf(
      "one layer, %d keys, D 256, Hkv 2, 4 queries per KV head, best of 15: f16 %.2f ms, q8_0 %.2f ms "
      "(%.2fx f16), q4_0 %.2f ms (%.2fx f16)\n",
      n, best[0] * 1e3, best[1] * 1e3, best[0] / best[1], best[2] * 1e3, best[0] / best[2]);
}
