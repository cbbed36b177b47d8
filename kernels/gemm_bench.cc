// Single-thread GemmRows throughput per weight type at prefill shapes: multiply-accumulates per CPU second of
// this thread (the machine is shared, so wall time is not used). Prints numbers, asserts nothing.
// Usage: gemm_bench [rows (default 3584)] [cols (default 1024)] [tokens (default 512)] [type name filter]
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "gguf/quants.h"
#include "kernels/gemm.h"
#include "kernels/gemm_act.h"

namespace {

using rw::gguf::TensorType;

double ThreadSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t rows = argc > 1 ? std::atoll(argv[1]) : 3584;
  const int64_t cols = argc > 2 ? std::atoll(argv[2]) : 1024;
  const int64_t toks = argc > 3 ? std::atoll(argv[3]) : 512;
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(cols);
  for (TensorType t : {TensorType::kQ8_0, TensorType::kQ4_K, TensorType::kQ6_K, TensorType::kF16}) {
    if (argc > 4 && std::strcmp(argv[4], rw::gguf::TypeName(t)) != 0) continue;
    if (!rw::kernels::GemmSupports(t)) continue;
    const TensorType at = rw::gguf::VecDotType(t);
    const size_t wb = rw::gguf::RowBytes(t, cols), ab = rw::gguf::RowBytes(at, cols);
    std::vector<uint8_t> w(wb * rows), a(ab * toks);
    for (int64_t r = 0; r < rows; ++r) {
      for (auto& v : x) v = dist(rng);
      rw::gguf::QuantizeRow(t, x.data(), w.data() + r * wb, cols);
    }
    for (int64_t r = 0; r < toks; ++r) {
      for (auto& v : x) v = dist(rng);
      rw::kernels::QuantizeActivation(at, x.data(), a.data() + r * ab, cols);
    }
    std::vector<float> y(rows * toks);
    double best = 0, best_base = 0;
    for (int rep = 0; rep < 6; ++rep) {
      rw::kernels::GemmAllowAvx512(rep % 2 == 0);
      const double t0 = ThreadSeconds();
      rw::kernels::GemmRows(t, cols, w.data(), wb, rows, a.data(), ab, toks, y.data(), rows);
      const double s = ThreadSeconds() - t0;
      double& b = rep % 2 == 0 ? best : best_base;
      b = std::max(b, static_cast<double>(rows) * cols * toks / s * 1e-9);
    }
    std::printf("%-5s %lldx%lld x %lld tokens: %.2f GMAC/s (plain AVX2 kernels: %.2f; best of 3, thread CPU time)\n",
                rw::gguf::TypeName(t), static_cast<long long>(rows), static_cast<long long>(cols),
                static_cast<long long>(toks), best, best_base);
  }
  return 0;
}
