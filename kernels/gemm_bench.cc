// Single-thread GemmRows throughput per weight type at prefill shapes: multiply-accumulates per CPU second of
// this thread (the machine is shared, so wall time is not used). Prints numbers, asserts nothing.
// Usage: gemm_bench [rows (default 3584)] [cols (default 1024)] [tokens (default 512)] [type name filter]
//        gemm_bench small [matrix MiB (default 128)] [cols (default 1024)] [type name filter]
//   The second form measures the few-token batches of speculative verification: weight GB/s per CPU second
//   streamed from a matrix larger than the caches, for 1 token (VecDotRows, the decode path) and 2-8 tokens.
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "gguf/quants.h"
#include "gguf/quants_lowbit_testing.h"
#include "kernels/gemm.h"
#include "kernels/gemm_act.h"
#include "kernels/vec_dot.h"

namespace {

using rw::gguf::TensorType;

double ThreadSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Weight bytes per CPU second of `toks`-token products over `rows` rows; passes until 0.5 s of CPU time.
double SmallBatchRate(TensorType t, int64_t cols, const std::vector<uint8_t>& w, size_t wb, int64_t rows,
                      const std::vector<uint8_t>& a, size_t ab, int64_t toks) {
  std::vector<float> y(rows * toks);
  auto pass = [&] {
    if (toks == 1) {
      rw::kernels::VecDotRows(t, cols, w.data(), wb, rows, a.data(), y.data());
    } else {
      rw::kernels::GemmRows(t, cols, w.data(), wb, rows, a.data(), ab, toks, y.data(), rows);
    }
  };
  pass();
  int64_t passes = 0;
  const double start = ThreadSeconds();
  double elapsed = 0;
  do {
    pass();
    ++passes;
    elapsed = ThreadSeconds() - start;
  } while (elapsed < 0.5);
  return static_cast<double>(passes) * static_cast<double>(wb * rows) / elapsed;
}

int SmallBatchMain(int argc, char** argv) {
  const int64_t mib = argc > 2 ? std::atoll(argv[2]) : 128;
  const int64_t cols = argc > 3 ? std::atoll(argv[3]) : 1024;
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(cols);
  std::printf("gemm_bench small: %lld MiB matrix, %lld columns, 1 thread, weight GB/s per CPU second\n",
              static_cast<long long>(mib), static_cast<long long>(cols));
  std::printf("%-5s %8s %8s %8s %8s %8s %8s\n", "type", "1 tok", "2", "3", "4", "6", "8");
  for (TensorType t : {TensorType::kQ8_0, TensorType::kQ4_K, TensorType::kQ5_K, TensorType::kQ6_K, TensorType::kF16}) {
    if (argc > 4 && std::strcmp(argv[4], rw::gguf::TypeName(t)) != 0) continue;
    if (!rw::kernels::GemmSupports(t)) continue;
    const TensorType at = rw::gguf::VecDotType(t);
    const size_t wb = rw::gguf::RowBytes(t, cols), ab = rw::gguf::RowBytes(at, cols);
    const int64_t rows = std::max<int64_t>(16, (mib << 20) / static_cast<int64_t>(wb)) / 16 * 16;
    // 64 distinct random rows repeated (quantising the whole matrix would dominate the run time).
    std::vector<uint8_t> w(wb * rows), a(ab * 8);
    for (int64_t r = 0; r < rows; ++r) {
      if (r < 64) {
        for (auto& v : x) v = dist(rng);
        rw::gguf::QuantizeRow(t, x.data(), w.data() + r * wb, cols);
      } else {
        std::memcpy(w.data() + r * wb, w.data() + (r % 64) * wb, wb);
      }
    }
    for (int64_t r = 0; r < 8; ++r) {
      for (auto& v : x) v = dist(rng);
      rw::kernels::QuantizeActivation(at, x.data(), a.data() + r * ab, cols);
    }
    std::printf("%-5s", rw::gguf::TypeName(t));
    for (int64_t toks : {1, 2, 3, 4, 6, 8})
      std::printf(" %8.2f", SmallBatchRate(t, cols, w, wb, rows, a, ab, toks) / 1e9);
    std::printf("\n");
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "small") == 0) return SmallBatchMain(argc, argv);
  const int64_t rows = argc > 1 ? std::atoll(argv[1]) : 3584;
  const int64_t cols = argc > 2 ? std::atoll(argv[2]) : 1024;
  const int64_t toks = argc > 3 ? std::atoll(argv[3]) : 512;
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(cols);
  std::vector<TensorType> types = {TensorType::kQ8_0, TensorType::kQ4_0, TensorType::kQ4_1, TensorType::kQ5_0,
                                   TensorType::kQ5_1, TensorType::kQ4_K, TensorType::kQ6_K, TensorType::kF16};
  for (TensorType t : rw::gguf::testing::kLowbitTypes) types.push_back(t);
  for (TensorType t : types) {
    if (argc > 4 && std::strcmp(argv[4], rw::gguf::TypeName(t)) != 0) continue;
    if (!rw::kernels::GemmSupports(t)) continue;
    const TensorType at = rw::gguf::VecDotType(t);
    const size_t wb = rw::gguf::RowBytes(t, cols), ab = rw::gguf::RowBytes(at, cols);
    std::vector<uint8_t> w(wb * rows), a(ab * toks);
    for (int64_t r = 0; r < rows; ++r) {
      for (auto& v : x) v = dist(rng);
      if (rw::gguf::IsLowbitType(t)) {  // no quantiser: random blocks
        const auto row = rw::gguf::testing::RandomLowbitRow(t, cols, rng);
        std::copy(row.begin(), row.end(), w.begin() + r * wb);
      } else {
        rw::gguf::QuantizeRow(t, x.data(), w.data() + r * wb, cols);
      }
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
    std::printf("%-7s %lldx%lld x %lld tokens: %.2f GMAC/s (plain AVX2 kernels: %.2f; best of 3, thread CPU time)\n",
                rw::gguf::TypeName(t), static_cast<long long>(rows), static_cast<long long>(cols),
                static_cast<long long>(toks), best, best_base);
  }
  return 0;
}
