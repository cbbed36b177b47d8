#include "kernels/read_bandwidth.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "base/check.h"
#include "base/cpu_features.h"

namespace rw::kernels {
namespace {

#if defined(__x86_64__)
__attribute__((target("avx2"))) uint64_t SumAvx2(const uint8_t* p, size_t n) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  size_t i = 0;
  for (; i + 128 <= n; i += 128) {
    a0 = _mm256_add_epi64(a0, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
    a1 = _mm256_add_epi64(a1, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 32)));
    a2 = _mm256_add_epi64(a2, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 64)));
    a3 = _mm256_add_epi64(a3, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 96)));
  }
  const __m256i s = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
  uint64_t out[4];
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), s);
  return out[0] + out[1] + out[2] + out[3];
}
#endif

uint64_t Sum(const uint8_t* p, size_t n) {
#if defined(__x86_64__)
  if (CpuHasAvx2Fma()) return SumAvx2(p, n);
#endif
  uint64_t s = 0;
  for (size_t i = 0; i + 8 <= n; i += 8) {
    uint64_t v;
    std::memcpy(&v, p + i, 8);
    s += v;
  }
  return s;
}

struct FreeDeleter {
  void operator()(uint8_t* p) const { std::free(p); }
};

}  // namespace

double MeasureReadBandwidth(ThreadPool& pool, size_t bytes_per_thread, int reps) {
  const int nt = pool.size();
  bytes_per_thread = std::max<size_t>(4096, bytes_per_thread / 4096 * 4096);
  std::vector<std::unique_ptr<uint8_t, FreeDeleter>> bufs(static_cast<size_t>(nt));
  std::vector<uint64_t> sinks(static_cast<size_t>(nt) * 8);
  pool.Run([&](int i, int) {
    auto* p = static_cast<uint8_t*>(std::aligned_alloc(4096, bytes_per_thread));
    REWIND_CHECK_MSG(p != nullptr, "cannot allocate %zu bytes for the bandwidth test", bytes_per_thread);
    std::memset(p, i + 1, bytes_per_thread);
    bufs[static_cast<size_t>(i)].reset(p);
  });
  std::vector<double> rates;
  for (int r = 0; r < reps + 1; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.Run([&](int i, int) { sinks[static_cast<size_t>(i) * 8] += Sum(bufs[static_cast<size_t>(i)].get(), bytes_per_thread); });
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r > 0) rates.push_back(static_cast<double>(bytes_per_thread) * nt / dt);
  }
  uint64_t all = 0;
  for (uint64_t s : sinks) all += s;
  REWIND_CHECK(all != 0);  // keeps the sums (the buffers are non-zero)
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

}  // namespace rw::kernels
