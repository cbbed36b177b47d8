// Matrix-vector throughput of VecDotRows per weight type, single thread: weight GB/s streamed from memory
// (matrix larger than the caches) and from cache (small matrix), AVX2 and scalar twin.
// Usage: vec_dot_bench [matrix_MiB (default 256)] [cols (default 4096)] [fast: skip the scalar column] [type name filter]
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "base/cpu_features.h"
#include "gguf/quants.h"
#include "gguf/quants_lowbit_testing.h"
#include "kernels/vec_dot.h"

namespace {

using rw::gguf::TensorType;

// CPU time of this thread: the machine is shared, so rates are per second of CPU actually received.
double ThreadSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Runs full passes over the matrix until min_seconds of thread CPU time elapse; returns weight bytes per
// CPU second.
double Measure(rw::kernels::VecDotImpl impl, TensorType t, int64_t cols, const std::vector<uint8_t>& w,
               size_t row_bytes, int64_t rows, const std::vector<uint8_t>& act, double min_seconds) {
  std::vector<float> out(rows);
  rw::kernels::VecDotRowsWith(impl, t, cols, w.data(), row_bytes, rows, act.data(), out.data());  // warm up
  int64_t passes = 0;
  const double start = ThreadSeconds();
  double elapsed = 0;
  do {
    rw::kernels::VecDotRowsWith(impl, t, cols, w.data(), row_bytes, rows, act.data(), out.data());
    ++passes;
    elapsed = ThreadSeconds() - start;
  } while (elapsed < min_seconds);
  volatile float sink = out[0];
  (void)sink;
  return static_cast<double>(passes) * static_cast<double>(row_bytes * rows) / elapsed;
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t mib = argc > 1 ? std::atoll(argv[1]) : 256;
  const int64_t cols = argc > 2 ? std::atoll(argv[2]) : 4096;
  const bool avx2 = rw::CpuHasAvx2FmaF16c();
  const bool skip_scalar = argc > 3 && std::strcmp(argv[3], "fast") == 0;
  std::printf("vec_dot_bench: cols=%lld, big matrix %lld MiB, small matrix 256 KiB, 1 thread, GB/s of weights per CPU-second, AVX2 %s\n",
              static_cast<long long>(cols), static_cast<long long>(mib), avx2 ? "yes" : "no");
  std::printf("%-7s %8s %14s %14s %14s %14s\n", "type", "bits/w", "mem AVX2 GB/s", "cache AVX2", "mem scalar",
              "Gelem/s AVX2");
  std::vector<TensorType> types = {TensorType::kF32,  TensorType::kF16,  TensorType::kBF16, TensorType::kQ8_0,
                                   TensorType::kQ4_0, TensorType::kQ4_1, TensorType::kQ5_0, TensorType::kQ5_1,
                                   TensorType::kQ4_K, TensorType::kQ5_K, TensorType::kQ6_K};
  for (TensorType t : rw::gguf::testing::kLowbitTypes) types.push_back(t);
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(cols);
  for (auto& v : x) v = dist(rng);
  for (TensorType t : types) {
    if (argc > 4 && std::strcmp(argv[4], rw::gguf::TypeName(t)) != 0) continue;
    const size_t row_bytes = rw::gguf::RowBytes(t, cols);
    const int64_t rows = std::max<int64_t>(4, (mib << 20) / static_cast<int64_t>(row_bytes));
    const int64_t small_rows = std::max<int64_t>(4, (256 << 10) / static_cast<int64_t>(row_bytes));
    // Quantise one random row and repeat it (quantising hundreds of MiB would dominate the run time).
    std::vector<uint8_t> one(row_bytes);
    std::vector<float> wrow(cols);
    for (auto& v : wrow) v = dist(rng);
    if (rw::gguf::IsLowbitType(t)) {  // no quantiser: random blocks with sane scales
      one = rw::gguf::testing::RandomLowbitRow(t, cols, rng);
    } else {
      rw::gguf::QuantizeRow(t, wrow.data(), one.data(), cols);
    }
    std::vector<uint8_t> w(row_bytes * rows);
    for (int64_t r = 0; r < rows; ++r) std::copy(one.begin(), one.end(), w.begin() + r * row_bytes);
    std::vector<uint8_t> small(w.begin(), w.begin() + row_bytes * small_rows);
    const TensorType at = rw::gguf::VecDotType(t);
    std::vector<uint8_t> act(rw::gguf::RowBytes(at, cols));
    rw::gguf::QuantizeRow(at, x.data(), act.data(), cols);

    using rw::kernels::VecDotImpl;
    const double mem = avx2 ? Measure(VecDotImpl::kAvx2, t, cols, w, row_bytes, rows, act, 1.0) : 0;
    const double cache = avx2 ? Measure(VecDotImpl::kAvx2, t, cols, small, row_bytes, small_rows, act, 0.5) : 0;
    const double scalar = skip_scalar ? 0 : Measure(VecDotImpl::kScalar, t, cols, w, row_bytes, rows, act, 1.0);
    const double bits = 8.0 * static_cast<double>(row_bytes) / static_cast<double>(cols);
    std::printf("%-7s %8.2f %14.2f %14.2f %14.2f %14.2f\n", rw::gguf::TypeName(t), bits, mem / 1e9, cache / 1e9,
                scalar / 1e9, cache * 8.0 / bits / 1e9);
    std::fflush(stdout);
  }
  return 0;
}
