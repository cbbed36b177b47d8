// A persistent pool of worker threads for splitting independent work: output rows of a matmul, heads of a
// GDN layer, (token, head) pairs of attention. It never splits a reduction, so results do not depend on the
// thread count (invariant I1): every task computes whole output elements with the same code.
//
// A parallel region costs microseconds at any thread count (docs/performance.md, "Threads"): the caller
// publishes a job by bumping one atomic generation; workers wait for it by spinning (pause, then yielding the
// core) and park on the generation (a futex) after kSpinNanos without work, so an idle process uses no
// CPU; each thread computes its own share from (n, its index), with no shared counter to take tasks from and no
// lock; completion is one atomic countdown the caller polls, then parks on (woken by the last thread). A pool with
// more threads than the CPUs the process may use parks at once instead of spinning.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace rw::kernels {

// Share i of nt of [0, n) split into units of `grain` (boundaries at multiples of grain, shares balanced to
// within one unit): [*b, *e), possibly empty.
inline void ShareOf(int64_t n, int64_t grain, int i, int nt, int64_t* b, int64_t* e) {
  const int64_t units = (n + grain - 1) / grain;
  *b = std::min(n, units * i / nt * grain);
  *e = std::min(n, units * (i + 1) / nt * grain);
}

class ThreadPool {
 public:
  // n_threads >= 1 counts the calling thread: n_threads - 1 workers are started.
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // One parallel region: fn(i, size()) on every thread i of the pool (the caller is thread 0); returns when all
  // calls have returned. Not reentrant (fn must not call back into the pool).
  void Run(const std::function<void(int, int)>& fn);

  // Calls fn(begin, end) on disjoint contiguous ranges covering [0, n), one per thread (ShareOf: boundaries at
  // multiples of `grain`, balanced). Runs fn(0, n) inline, without a region, when there is one range only.
  void ParallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain = 1);

  // Parallel regions run so far (Run calls with more than one thread): `rewind bench` reports regions per token.
  uint64_t regions() const { return regions_; }

 private:
  void WorkerLoop(int index);

  int n_threads_;
  int64_t spin_ns_;       // how long a waiting thread spins before it parks (0 when oversubscribed)
  uint64_t regions_ = 0;  // written by the caller only
  std::vector<std::thread> workers_;
  alignas(64) std::atomic<uint32_t> generation_{0};  // futex word: bumped once per region
  alignas(64) std::atomic<int> sleepers_{0};          // workers parked (or about to park) on generation_
  alignas(64) std::atomic<int> pending_{0};           // workers still running the current region
  std::atomic<bool> caller_parked_{false};            // the caller waits on pending_ (futex)
  std::atomic<bool> stop_{false};
  const std::function<void(int, int)>* job_ = nullptr;  // published by the release store of generation_
};

// Runs fn over [0, n) on `pool`, or inline when pool is null.
inline void ParallelFor(ThreadPool* pool, int64_t n, const std::function<void(int64_t, int64_t)>& fn,
                        int64_t grain = 1) {
  if (n <= 0) return;
  if (pool == nullptr) {
    fn(0, n);
  } else {
    pool->ParallelFor(n, fn, grain);
  }
}

// One region on `pool` (fn(i, nt) per thread), or fn(0, 1) inline when pool is null.
inline void RunOnThreads(ThreadPool* pool, const std::function<void(int, int)>& fn) {
  if (pool == nullptr) {
    fn(0, 1);
  } else {
    pool->Run(fn);
  }
}

// Mean wall time of one empty region on `pool`, in ns, over up to `reps` regions or ~0.2 s (rewind bench).
double MeasureRegionNanos(ThreadPool& pool, int reps);

}  // namespace rw::kernels
