#include "kernels/thread_pool.h"

#include <sched.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include <chrono>

#include "base/check.h"

namespace rw::kernels {
namespace {

// A waiting thread spins on the word it waits for for up to kSpinNanos: a decode step runs a region every few
// microseconds, and a futex wake-up costs several. The spin pauses the core (_mm_pause) for its first
// kPureSpins polls, then yields the core (sched_yield) between polls: a pure pause loop made two concurrent
// processes on a 2-core machine 13x slower (the spinner held the core its partner needed), while sched_yield
// costs about a syscall when the core has nothing else to run. After kSpinNanos a thread parks on the word
// (futex) until the next region, so an idle server uses no CPU and a loaded machine's scheduler sees the
// threads sleep and wakes them promptly. A pool with more threads than the CPUs the process may use does not
// spin at all: a spinner would hold a CPU that a thread the region waits for needs.
constexpr int64_t kSpinNanos = 50'000;
constexpr int kPureSpins = 64;
constexpr int kYieldEvery = 1;

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

// Polls done() until it holds or spin_ns have passed; returns done().
template <typename Done>
inline bool Spin(const Done& done, int64_t spin_ns) {
  if (spin_ns <= 0) return done();
  for (int i = 0; i < kPureSpins; ++i) {
    if (done()) return true;
    CpuRelax();
  }
  const auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(spin_ns);
  for (;;) {
    for (int i = 0; i < kYieldEvery; ++i) {
      if (done()) return true;
      CpuRelax();
    }
    sched_yield();
    if (std::chrono::steady_clock::now() >= until) return done();
  }
}

int UsableCpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

}  // namespace

ThreadPool::ThreadPool(int n_threads)
    : n_threads_(std::max(1, n_threads)), spin_ns_(n_threads_ <= UsableCpus() ? kSpinNanos : 0) {
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_seq_cst);
  generation_.fetch_add(1, std::memory_order_seq_cst);
  generation_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::Run(const std::function<void(int, int)>& fn) {
  if (n_threads_ == 1) {
    fn(0, 1);
    return;
  }
  REWIND_CHECK_MSG(job_ == nullptr, "ThreadPool::Run is not reentrant");
  job_ = &fn;
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  // seq_cst store then seq_cst load of sleepers_: a worker that counted itself as a sleeper before this load
  // gets the notify; one that counts itself after it sees the new generation before it parks.
  generation_.fetch_add(1, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) generation_.notify_all();
  fn(0, n_threads_);
  if (!Spin([this] { return pending_.load(std::memory_order_acquire) == 0; }, spin_ns_)) {
    // Park until the last worker's countdown (same seq_cst pairing as above, with caller_parked_).
    caller_parked_.store(true, std::memory_order_seq_cst);
    for (int v; (v = pending_.load(std::memory_order_seq_cst)) != 0;) pending_.wait(v, std::memory_order_seq_cst);
    caller_parked_.store(false, std::memory_order_relaxed);
  }
  std::atomic_thread_fence(std::memory_order_acquire);
  job_ = nullptr;
  ++regions_;
}

void ThreadPool::ParallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t units = (n + grain - 1) / grain;
  const int nt = static_cast<int>(std::min<int64_t>(n_threads_, units));
  if (nt <= 1) {
    fn(0, n);
    return;
  }
  Run([&](int i, int) {
    if (i >= nt) return;
    int64_t b, e;
    ShareOf(n, grain, i, nt, &b, &e);
    if (b < e) fn(b, e);
  });
}

void ThreadPool::WorkerLoop(int index) {
  uint32_t seen = 0;
  for (;;) {
    auto changed = [&] { return generation_.load(std::memory_order_acquire) != seen; };
    if (!Spin(changed, spin_ns_)) {
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      while (generation_.load(std::memory_order_seq_cst) == seen) generation_.wait(seen, std::memory_order_seq_cst);
      sleepers_.fetch_sub(1, std::memory_order_relaxed);
    }
    seen = generation_.load(std::memory_order_acquire);
    if (stop_.load(std::memory_order_acquire)) return;
    (*job_)(index, n_threads_);
    if (pending_.fetch_sub(1, std::memory_order_seq_cst) == 1 && caller_parked_.load(std::memory_order_seq_cst))
      pending_.notify_one();
  }
}

double MeasureRegionNanos(ThreadPool& pool, int reps) {
  std::atomic<int64_t> sink{0};
  auto region = [&](int i, int) { if (i < 0) sink.fetch_add(1, std::memory_order_relaxed); };
  for (int r = 0; r < 16; ++r) pool.Run(region);  // wake parked workers
  // At most about 0.2 s (an oversubscribed pool parks between regions: milliseconds each).
  const auto t0 = std::chrono::steady_clock::now();
  const auto stop = t0 + std::chrono::milliseconds(200);
  int done = 0;
  while (done < reps && (done % 64 != 0 || std::chrono::steady_clock::now() < stop)) {
    pool.Run(region);
    ++done;
  }
  const auto dt = std::chrono::steady_clock::now() - t0;
  return std::chrono::duration<double, std::nano>(dt).count() / std::max(1, done);
}

}  // namespace rw::kernels
