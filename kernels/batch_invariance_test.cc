// Invariant I1 at kernel level: results are bit-identical whatever the batch size, the split of a batch into
// calls, the page size or the thread count.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "kernels/attention.h"
#include "kernels/conv.h"
#include "kernels/matmul.h"
#include "kernels/random_testing.h"
#include "kernels/ref/kernels_ref.h"
#include "kernels/thread_pool.h"
#if REWIND_HAVE_QUANTS
#include "gguf/quants.h"
#endif

namespace rw::kernels {
namespace {

bool SameBits(const float* a, const float* b, size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

TEST(BatchInvariance, MatMulRowsAreIdenticalForAnyBatchSizeSplitAndThreadCount) {
  const int64_t K = 72, R = 37, T = 64;
  auto w = Random(R * K, 1), x = Random(T * K, 2);
  Matrix m{gguf::TensorType::kF32, reinterpret_cast<const uint8_t*>(w.data()), K, R, uint64_t(K) * 4};
  // Reference: one token at a time, one thread.
  std::vector<float> single(T * R);
  for (int64_t t = 0; t < T; ++t) MatMul(m, x.data() + t * K, 1, single.data() + t * R, nullptr);
  std::mt19937 rng(3);
  for (int threads : {1, 2, 3, 16}) {
    ThreadPool pool(threads);
    for (int64_t bs = 1; bs <= T; bs = bs * 2 + 1) {
      std::vector<float> y(T * R);
      for (int64_t t0 = 0; t0 < T; t0 += bs) {
        const int64_t n = std::min(bs, T - t0);
        MatMul(m, x.data() + t0 * K, n, y.data() + t0 * R, &pool);
      }
      EXPECT_TRUE(SameBits(y.data(), single.data(), y.size())) << "threads " << threads << " batch " << bs;
    }
    // Random splits.
    for (int trial = 0; trial < 5; ++trial) {
      std::vector<float> y(T * R);
      int64_t t0 = 0;
      while (t0 < T) {
        const int64_t n = std::min<int64_t>(T - t0, 1 + rng() % 20);
        MatMul(m, x.data() + t0 * K, n, y.data() + t0 * R, &pool);
        t0 += n;
      }
      EXPECT_TRUE(SameBits(y.data(), single.data(), y.size()));
    }
  }
}

TEST(BatchInvariance, CausalConvSplitIntoCallsAndChannelRangesGivesTheSameBits) {
  const int C = 24, Kc = 4, T = 40;
  auto w = Random(C * Kc, 4), x = Random(T * C, 5);
  std::vector<float> s1(C * 3, 0.0f), y1(T * C);
  CausalConvRun(s1.data(), w.data(), x.data(), C, T, 0, C, Kc, y1.data(), C);
  std::mt19937 rng(6);
  std::vector<float> s2(C * 3, 0.0f), y2(T * C);
  int t0 = 0;
  while (t0 < T) {
    const int n = std::min<int>(T - t0, 1 + rng() % 9);
    for (int c0 = 0; c0 < C; c0 += 7)
      CausalConvRun(s2.data(), w.data(), x.data() + t0 * C, C, n, c0, std::min(C, c0 + 7), Kc, y2.data() + t0 * C, C);
    t0 += n;
  }
  EXPECT_TRUE(SameBits(y1.data(), y2.data(), y1.size()));
  EXPECT_TRUE(SameBits(s1.data(), s2.data(), s1.size()));
}

TEST(BatchInvariance, AttentionDoesNotDependOnPageSize) {
  const int D = 32, W = 64, n = 77;
  auto K = Random(n * W, 7), V = Random(n * W, 8), q = Random(D, 9);
  std::vector<float> base(D);
  for (int page : {1, 8, 32, 64}) {
    const int n_pages = (n + page - 1) / page;
    std::vector<std::vector<float>> kp(n_pages, std::vector<float>(page * W)), vp = kp;
    for (int p = 0; p < n; ++p)
      for (int c = 0; c < W; ++c) kp[p / page][(p % page) * W + c] = K[p * W + c], vp[p / page][(p % page) * W + c] = V[p * W + c];
    std::vector<const uint8_t*> kptr, vptr;
    for (int i = 0; i < n_pages; ++i) {
      kptr.push_back(reinterpret_cast<const uint8_t*>(kp[i].data()));
      vptr.push_back(reinterpret_cast<const uint8_t*>(vp[i].data()));
    }
    KvPages view{kptr.data(), vptr.data(), page, W, KvType::kF32, KvType::kF32};
    std::vector<float> o(D);
    AttendOne(q.data(), D, 1, n, view, 0.2f, o.data());
    if (page == 1) base = o;
    EXPECT_TRUE(SameBits(o.data(), base.data(), D)) << "page " << page;
  }
}

#if REWIND_HAVE_QUANTS
TEST(BatchInvariance, QuantisedMatMulIsBitwiseInvariantAndCloseToDequantisedReference) {
  using gguf::TensorType;
  const int64_t K = 512, R = 23, T = 40;
  auto wf = Random(R * K, 10), x = Random(T * K, 11);
  for (TensorType type : {TensorType::kQ8_0, TensorType::kQ4_0, TensorType::kQ4_K, TensorType::kQ6_K,
                          TensorType::kF16, TensorType::kBF16}) {
    const size_t rb = gguf::RowBytes(type, K);
    std::vector<uint8_t> wq(rb * R);
    for (int64_t r = 0; r < R; ++r) gguf::QuantizeRow(type, wf.data() + r * K, wq.data() + r * rb, K);
    Matrix m{type, wq.data(), K, R, rb};
    ASSERT_TRUE(MatMulSupports(type));
    std::vector<float> single(T * R), ref(T * R);
    for (int64_t t = 0; t < T; ++t) MatMul(m, x.data() + t * K, 1, single.data() + t * R, nullptr);
    // Twin: dequantised weights times the activations after the same rounding to VecDotType, in double.
    const TensorType at = gguf::VecDotType(type);
    std::vector<uint8_t> xq(gguf::RowBytes(at, K));
    std::vector<float> xr(T * K);
    for (int64_t t = 0; t < T; ++t) {
      gguf::QuantizeRow(at, x.data() + t * K, xq.data(), K);
      gguf::DequantizeRow(at, xq.data(), xr.data() + t * K, K);
    }
    ref::MatMul(m, xr.data(), T, ref.data());
    for (size_t i = 0; i < ref.size(); ++i)
      EXPECT_NEAR(single[i], ref[i], 1e-3 * (1 + std::fabs(ref[i]))) << gguf::TypeName(type);
    std::mt19937 rng(12);
    for (int threads : {1, 2, 3, 5, 8, 16}) {
      ThreadPool pool(threads);
      std::vector<float> y(T * R);
      int64_t t0 = 0;
      while (t0 < T) {
        const int64_t n = std::min<int64_t>(T - t0, 1 + rng() % 16);
        MatMul(m, x.data() + t0 * K, n, y.data() + t0 * R, &pool);
        t0 += n;
      }
      EXPECT_TRUE(SameBits(y.data(), single.data(), y.size())) << gguf::TypeName(type) << " threads " << threads;
    }
  }
}

TEST(BatchInvariance, MatMulManyGivesEachProductTheBitsOfItsOwnMatMulForAnyThreadCount) {
  using gguf::TensorType;
  const int64_t K = 512;
  struct Spec {
    TensorType type;
    int64_t rows, n_tok;
    int x;  // which activation
  };
  // Mixed types, row counts that are not multiples of the alignment, shared and distinct activations, 1-9 tokens.
  const Spec specs[] = {{TensorType::kQ8_0, 37, 1, 0}, {TensorType::kQ4_K, 16, 1, 0}, {TensorType::kQ6_K, 5, 1, 1},
                        {TensorType::kF32, 19, 1, 0},  {TensorType::kQ8_0, 64, 9, 2}, {TensorType::kQ4_K, 23, 9, 2}};
  std::vector<std::vector<float>> xs;
  for (int i = 0; i < 3; ++i) xs.push_back(Random(9 * K, 20 + i));
  std::vector<std::vector<uint8_t>> ws;
  std::vector<Matrix> ms;
  for (size_t j = 0; j < std::size(specs); ++j) {
    const Spec& sp = specs[j];
    auto wf = Random(sp.rows * K, 30 + static_cast<int>(j));
    const size_t rb = sp.type == TensorType::kF32 ? K * 4 : gguf::RowBytes(sp.type, K);
    ws.emplace_back(rb * sp.rows);
    for (int64_t r = 0; r < sp.rows; ++r) {
      if (sp.type == TensorType::kF32) std::memcpy(ws.back().data() + r * rb, wf.data() + r * K, rb);
      else gguf::QuantizeRow(sp.type, wf.data() + r * K, ws.back().data() + r * rb, K);
    }
    ms.push_back({sp.type, ws.back().data(), K, sp.rows, rb});
  }
  // Reference: each product alone, one thread; the paired job: the product of ms[1] twice, then y·y2 per element.
  std::vector<std::vector<float>> want;
  for (size_t j = 0; j < std::size(specs); ++j) {
    want.emplace_back(specs[j].rows * specs[j].n_tok);
    MatMul(ms[j], xs[specs[j].x].data(), specs[j].n_tok, want.back().data(), nullptr);
  }
  for (int threads : {1, 2, 3, 5, 8, 16}) {
    ThreadPool pool(threads);
    std::vector<std::vector<float>> got, got2;
    std::vector<MatMulJob> jobs;
    for (size_t j = 0; j < std::size(specs); ++j) {
      got.emplace_back(specs[j].rows * specs[j].n_tok, -1.0f);
      got2.emplace_back(specs[j].rows * specs[j].n_tok, -1.0f);
    }
    std::vector<int> rows_seen(specs[1].rows, 0);
    const std::function<void(int64_t, int64_t)> done = [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        rows_seen[r]++;
        EXPECT_TRUE(SameBits(&got[1][r], &got2[1][r], 1)) << "y2 row " << r << " done before the epilogue";
        got[1][r] = got[1][r] * got2[1][r];
      }
    };
    for (size_t j = 0; j < std::size(specs); ++j) {
      MatMulJob job = Product(ms[j], xs[specs[j].x].data(), specs[j].n_tok, got[j].data());
      if (j == 1) {
        job.w2 = ms[1];
        job.y2 = got2[1].data();
        job.rows_done = &done;
      }
      jobs.push_back(job);
    }
    MatMulMany(jobs, &pool);
    for (size_t j = 0; j < std::size(specs); ++j) {
      if (j == 1) {
        for (size_t i = 0; i < want[1].size(); ++i) {
          const float sq = want[1][i] * want[1][i];
          EXPECT_TRUE(SameBits(&got[1][i], &sq, 1)) << "paired job, threads " << threads;
        }
        continue;
      }
      EXPECT_TRUE(SameBits(got[j].data(), want[j].data(), want[j].size())) << "job " << j << " threads " << threads;
    }
    for (int c : rows_seen) EXPECT_EQ(c, 1) << "every row's epilogue runs exactly once";
  }
}
#endif

}  // namespace
}  // namespace rw::kernels
