// Attention over a long KV cache per cache type, one thread, the Qwen3.5 shape (D 256, 2 KV heads, 4 query
// heads per KV head), types interleaved, best of R in thread CPU time:
//   decode: one token's attention in one layer (AttendGroup over the 4 heads of each KV head);
//   prefill: 64 new tokens' attention in one layer at depth N (AttendGroup over 4 heads x TOK tokens; the model
//   calls it with 16), reported as ms per 64 tokens and as tokens/s of attention for that layer.
// Usage: build/kernels/attention_bench [N=16384] [R=7] [TOK=8]
#include <algorithm>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "kernels/attention.h"
#include "kernels/kv_quant.h"
using namespace rw::kernels;
int main(int argc, char** argv) {
  const int D = 256, Hkv = 2, W = D * Hkv, page = 32, G = 4, T = 64;
  const int n = argc > 1 ? std::max(page, std::atoi(argv[1]) / page * page) : 16384;
  const int reps = argc > 2 ? std::max(1, std::atoi(argv[2])) : 7;
  const int kTok = argc > 3 ? std::clamp(std::atoi(argv[3]), 1, T) : 8;
  const int total = n + T;  // the prefill's own rows follow the depth
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
    for (int p = 0; p < (total + page - 1) / page; ++p) {
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
  std::vector<float> q(T * G * D), out(T * G * D);
  for (auto& x : q) x = dist(rng);
  AttendQuery dq[G];
  for (int j = 0; j < G; ++j) dq[j] = {q.data() + j * D, out.data() + j * D, n};
  double dec[3] = {1e9, 1e9, 1e9}, pre[3] = {1e9, 1e9, 1e9};
  Cache* cs[3] = {&f16, &q8, &q4};
  // Thread CPU time, not wall time: on a shared machine the wall clock counts other processes' turns too.
  auto now = [] {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
  };
  auto secs = [](double a, double b) { return b - a; };
  for (int it = 0; it < reps; ++it)
    for (int c = 0; c < 3; ++c) {
      auto t0 = now();
      for (int h = 0; h < Hkv; ++h) AttendGroup(dq, G, D, h, cs[c]->view, 0.0625f);
      dec[c] = std::min(dec[c], secs(t0, now()));
      t0 = now();
      for (int h = 0; h < Hkv; ++h)
        for (int t = 0; t + kTok <= T; t += kTok) {
          std::vector<AttendQuery> pq(G * kTok);
          for (int i = 0; i < kTok; ++i)
            for (int j = 0; j < G; ++j) {
              const int r = ((t + i) * G + j) * D;
              pq[i * G + j] = {q.data() + r, out.data() + r, n + t + i + 1};
            }
          AttendGroup(pq.data(), G * kTok, D, h, cs[c]->view, 0.0625f);
        }
      pre[c] = std::min(pre[c], secs(t0, now()));
    }
  const char* names[3] = {"f16", "q8_0", "q4_0"};
  std::printf("one layer, depth %d, D 256, Hkv 2, 4 query heads per KV head, %d tokens per call, 1 thread, best of %d\n",
              n, kTok, reps);
  for (int c = 0; c < 3; ++c)
    std::printf("  %-5s decode %7.2f ms/token   prefill %8.2f ms per %d tokens (%7.1f tok/s)\n", names[c],
                dec[c] * 1e3, pre[c] * 1e3, T, T / pre[c]);
}
