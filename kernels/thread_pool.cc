#include "kernels/thread_pool.h"

#include <algorithm>

#include "base/check.h"

namespace rw::kernels {

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::max(1, n_threads)) {
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  start_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

namespace {
// Pauses to spin before sleeping. 0: on the shared, oversubscribed 2-core build machine any spinning halved
// decode speed (tiny q8_0 tg128: 383 tok/s at 0, 179 at 512, 12 at 16384), since a spinning thread takes
// the core its partner needs. Worth re-measuring on dedicated cores.
constexpr int kSpin = 0;

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

inline void ChunkRange(int64_t n, int n_chunks, int i, int64_t* b, int64_t* e) {
  *b = n * i / n_chunks;
  *e = n * (i + 1) / n_chunks;
}
}  // namespace

void ThreadPool::ParallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t max_chunks = (n + grain - 1) / grain;
  const int n_chunks = static_cast<int>(std::min<int64_t>(n_threads_, max_chunks));
  if (n_chunks <= 1) {
    fn(0, n);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    REWIND_CHECK(pending_ == 0);
    fn_ = &fn;
    n_ = n;
    n_chunks_ = n_chunks;
    pending_ = n_chunks - 1;
    ++generation_;
  }
  start_cv_.notify_all();
  int64_t b, e;
  ChunkRange(n, n_chunks, 0, &b, &e);
  fn(b, e);
  for (int i = 0; i < kSpin && pending_.load(std::memory_order_acquire) != 0; ++i) CpuRelax();
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [this] { return pending_.load(std::memory_order_acquire) == 0; });
  fn_ = nullptr;
}

void ThreadPool::WorkerLoop(int index) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int64_t, int64_t)>* fn;
    int64_t n;
    int n_chunks;
    for (int i = 0; i < kSpin && generation_.load(std::memory_order_acquire) == seen; ++i) CpuRelax();
    {
      std::unique_lock<std::mutex> lock(mu_);
      start_cv_.wait(lock, [&] { return stop_ || generation_.load(std::memory_order_relaxed) != seen; });
      if (stop_) return;
      seen = generation_.load(std::memory_order_relaxed);
      fn = fn_;
      n = n_;
      n_chunks = n_chunks_;
    }
    if (index < n_chunks) {
      int64_t b, e;
      ChunkRange(n, n_chunks, index, &b, &e);
      (*fn)(b, e);
      if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard<std::mutex> lock(mu_);  // the caller checks pending_ under mu_ before it sleeps
        done_cv_.notify_one();
      }
    }
  }
}

}  // namespace rw::kernels
