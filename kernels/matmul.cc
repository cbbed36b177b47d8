#include "kernels/matmul.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "base/check.h"
#include "kernels/alloc_tuning.h"
#include "kernels/dot.h"

// REWIND_HAVE_QUANTS is defined by kernels/CMakeLists.txt once gguf/quants.cc and kernels/vec_dot.h exist.
#if REWIND_HAVE_QUANTS
#include "gguf/quants.h"
#include "kernels/gemm.h"
#include "kernels/gemm_act.h"
#include "kernels/vec_dot.h"
#endif

namespace rw::kernels {
namespace {

constexpr int64_t kRowBlock = 16;  // output rows per inner block (cache reuse of x); does not affect results

// y[t][r] for r in [r0, r1), t < n_tok: rows of w against the activation rows act (arow bytes apart: the float
// rows of x for F32 weights, else x converted to VecDotType(w.type)).
void RowsTimesActs(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act, uint64_t arow, int64_t n_tok,
                   float* y) {
  const int64_t K = w.n_cols, R = w.n_rows;
  if (w.type == gguf::TensorType::kF32) {
    for (int64_t rb = r0; rb < r1; rb += kRowBlock) {
      const int64_t re = std::min(r1, rb + kRowBlock);
      for (int64_t t = 0; t < n_tok; ++t) {
        const float* xt = reinterpret_cast<const float*>(act + t * arow);
        float* yt = y + t * R;
        for (int64_t r = rb; r < re; ++r) yt[r] = DotF32(reinterpret_cast<const float*>(w.Row(r)), xt, K);
      }
    }
    return;
  }
#if REWIND_HAVE_QUANTS
  if (n_tok >= 2 && GemmSupports(w.type)) {
    // Register-blocked tiles (kernels/gemm.h); each element has the bits of the VecDotRows path below.
    GemmRows(w.type, K, w.Row(r0), w.row_bytes, r1 - r0, act, arow, n_tok, y + r0, R);
    return;
  }
  for (int64_t rb = r0; rb < r1; rb += kRowBlock) {
    const int64_t re = std::min(r1, rb + kRowBlock);
    for (int64_t t = 0; t < n_tok; ++t)
      VecDotRows(w.type, K, w.Row(rb), w.row_bytes, re - rb, act + t * arow, y + t * R + rb);
  }
#else
  REWIND_CHECK_MSG(false, "weight type %s not supported in this build", gguf::TypeName(w.type));
#endif
}

// The activation rows one or more jobs read, converted once.
struct Act {
  const float* x;
  gguf::TensorType type;  // VecDotType of the weights (kF32: x itself)
  int64_t K, n_tok;
  uint64_t arow = 0;            // bytes per converted row
  const uint8_t* rows = nullptr;  // [n_tok][arow]
  uint64_t offset = 0;          // into the scratch buffer
};

gguf::TensorType ActType(gguf::TensorType weight) {
  if (weight == gguf::TensorType::kF32) return weight;
#if REWIND_HAVE_QUANTS
  return gguf::VecDotType(weight);
#else
  REWIND_CHECK_MSG(false, "weight type %s not supported in this build", gguf::TypeName(weight));
  return weight;
#endif
}

// Fills acts (one per distinct activation) and job_act (its index per job), converting the rows: inline when
// there is little to convert, else in one region over all (activation, token) rows.
void PrepareActs(std::span<const MatMulJob> jobs, ThreadPool* pool, std::vector<Act>* acts, std::vector<int>* job_act) {
  thread_local ScratchBuffer<uint8_t> buf;
  uint64_t bytes = 0;
  int64_t convert_rows = 0, convert_elems = 0;
  for (const MatMulJob& j : jobs) {
    const gguf::TensorType at = ActType(j.w.type);
    int found = -1;
    for (size_t a = 0; a < acts->size(); ++a) {
      const Act& c = (*acts)[a];
      if (c.x == j.x && c.type == at && c.K == j.w.n_cols && c.n_tok == j.n_tok) found = static_cast<int>(a);
    }
    if (found < 0) {
      Act c{j.x, at, j.w.n_cols, j.n_tok};
      if (at == gguf::TensorType::kF32) {
        c.arow = static_cast<uint64_t>(c.K) * sizeof(float);
        c.rows = reinterpret_cast<const uint8_t*>(j.x);
      } else {
#if REWIND_HAVE_QUANTS
        c.arow = gguf::RowBytes(at, c.K);
        c.offset = bytes;
        bytes += (c.arow * c.n_tok + 63) / 64 * 64;
        convert_rows += c.n_tok;
        convert_elems += c.n_tok * c.K;
#endif
      }
      found = static_cast<int>(acts->size());
      acts->push_back(c);
    }
    job_act->push_back(found);
  }
  if (convert_rows == 0) return;
#if REWIND_HAVE_QUANTS
  uint8_t* base = buf.Get(static_cast<size_t>(bytes) + 64);
  std::vector<std::pair<int, int64_t>> rows;  // (act, token) to convert
  for (size_t a = 0; a < acts->size(); ++a) {
    Act& c = (*acts)[a];
    if (c.type == gguf::TensorType::kF32) continue;
    c.rows = base + c.offset;
    for (int64_t t = 0; t < c.n_tok; ++t) rows.emplace_back(static_cast<int>(a), t);
  }
  auto convert = [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const Act& c = (*acts)[rows[i].first];
      const int64_t t = rows[i].second;
      QuantizeActivation(c.type, c.x + t * c.K, const_cast<uint8_t*>(c.rows) + t * c.arow, c.K);
    }
  };
  // A region costs about as much as converting ~32K elements on one core.
  if (convert_elems <= 32768) {
    convert(0, static_cast<int64_t>(rows.size()));
  } else {
    ParallelFor(pool, static_cast<int64_t>(rows.size()), convert);
  }
#endif
}

}  // namespace

void MatMulMany(std::span<const MatMulJob> jobs, ThreadPool* pool) {
  std::vector<Act> acts;
  std::vector<int> job_act;
  acts.reserve(jobs.size());
  PrepareActs(jobs, pool, &acts, &job_act);
  // Cost of one unit (kMatMulRowAlign rows) of each job, and where each job starts on the cost line.
  const size_t J = jobs.size();
  std::vector<int64_t> unit_cost(J), start(J + 1, 0);
  for (size_t j = 0; j < J; ++j) {
    const MatMulJob& jb = jobs[j];
    const bool live = jb.n_tok > 0 && jb.w.n_rows > 0;
    const int64_t row_bytes = static_cast<int64_t>(jb.w.row_bytes + (jb.w2.data ? jb.w2.row_bytes : 0));
    unit_cost[j] = std::max<int64_t>(1, kMatMulRowAlign * row_bytes * std::max<int64_t>(1, jb.n_tok));
    const int64_t units = live ? (jb.w.n_rows + kMatMulRowAlign - 1) / kMatMulRowAlign : 0;
    start[j + 1] = start[j] + units * unit_cost[j];
  }
  const int64_t total = start[J];
  if (total == 0) return;
  auto run_share = [&](int i, int nt) {
    // The units whose start lies in [lo, hi) of the cost line.
    const int64_t lo = static_cast<int64_t>(static_cast<__int128>(total) * i / nt);
    const int64_t hi = static_cast<int64_t>(static_cast<__int128>(total) * (i + 1) / nt);
    for (size_t j = 0; j < J; ++j) {
      if (start[j + 1] <= lo || start[j] >= hi) continue;
      const MatMulJob& jb = jobs[j];
      const int64_t c = unit_cost[j];
      const int64_t k0 = lo <= start[j] ? 0 : (lo - start[j] + c - 1) / c;
      const int64_t k1 = (hi - start[j] + c - 1) / c;
      const int64_t r0 = k0 * kMatMulRowAlign, r1 = std::min(jb.w.n_rows, k1 * kMatMulRowAlign);
      if (r0 >= r1) continue;
      const Act& a = acts[job_act[j]];
      RowsTimesActs(jb.w, r0, r1, a.rows, a.arow, jb.n_tok, jb.y);
      if (jb.w2.data != nullptr) RowsTimesActs(jb.w2, r0, r1, a.rows, a.arow, jb.n_tok, jb.y2);
      if (jb.rows_done != nullptr) (*jb.rows_done)(r0, r1);
    }
  };
  const int64_t units = total / std::max<int64_t>(1, *std::min_element(unit_cost.begin(), unit_cost.end()));
  if (pool == nullptr || pool->size() == 1 || units <= 1) {
    run_share(0, 1);
    return;
  }
  pool->Run(run_share);
}

bool MatMulSupports(gguf::TensorType type) {
  if (type == gguf::TensorType::kF32) return true;
#if REWIND_HAVE_QUANTS
  return gguf::IsSupportedWeightType(type);
#else
  return false;
#endif
}

void MatMul(const Matrix& w, const float* x, int64_t n_tok, float* y, ThreadPool* pool) {
  if (n_tok <= 0 || w.n_rows <= 0) return;
  MatMulJob job;
  job.w = w;
  job.x = x;
  job.n_tok = n_tok;
  job.y = y;
  MatMulMany({&job, 1}, pool);
}

void DequantizeRowTo(const Matrix& w, int64_t row, float* out) {
  if (w.type == gguf::TensorType::kF32) {
    std::memcpy(out, w.Row(row), sizeof(float) * w.n_cols);
    return;
  }
#if REWIND_HAVE_QUANTS
  gguf::DequantizeRow(w.type, w.Row(row), out, w.n_cols);
#else
  REWIND_CHECK_MSG(false, "weight type %s not supported in this build", gguf::TypeName(w.type));
#endif
}

}  // namespace rw::kernels
