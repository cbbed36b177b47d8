// A persistent pool of worker threads for splitting independent work: output rows of a matmul, heads of a
// GDN layer, (token, head) pairs of attention. It never splits a reduction, so results do not depend on the
// thread count (invariant I1): every task computes whole output elements with the same code.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace rw::kernels {

class ThreadPool {
 public:
  // n_threads >= 1 counts the calling thread: n_threads - 1 workers are started.
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Calls fn(begin, end) on disjoint contiguous ranges covering [0, n); the caller takes one range. Blocks until
  // all ranges are done. Ranges are at least `grain` long (except the last). Not reentrant.
  void ParallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain = 1);

 private:
  void WorkerLoop(int index);

  int n_threads_;
  std::vector<std::thread> workers_;
  // Workers and the caller may spin (kSpin pauses, thread_pool.cc) on the atomics before sleeping on the
  // condition variables; a decode step runs hundreds of small ParallelFor calls.
  std::mutex mu_;
  std::condition_variable start_cv_, done_cv_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  bool stop_ = false;
  // Current job.
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0;
  int n_chunks_ = 0;
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

}  // namespace rw::kernels
