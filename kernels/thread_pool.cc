#include "kernels/thread_pool.h"

#include <sched.h>

#include <algorithm>
#include <chrono>

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
// Before sleeping on a condition variable (a futex round trip of several microseconds, paid by every
// ParallelFor of a decode step), waiting threads poll for up to kSpinNanos, yielding the core on every poll.
// Yielding matters: a pure pause loop made two concurrent processes on the 2-core machine 13x slower (tiny q8_0
// tg128 at 94 tok/s instead of 1260: the spinner held the core its partner needed), while polling with
// sched_yield costs nothing when the core has nothing else to run (measured: docs/performance.md).
constexpr int64_t kSpinNanos = 50'000;

template <typename Done>
inline void SpinWhileNot(const Done& done) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(kSpinNanos);
  while (!done() && std::chrono::steady_clock::now() < until) sched_yield();
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
  SpinWhileNot([this] { return pending_.load(std::memory_order_acquire) == 0; });
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
    SpinWhileNot([&] { return generation_.load(std::memory_order_acquire) != seen; });
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
