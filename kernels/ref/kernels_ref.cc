#include "kernels/ref/kernels_ref.h"

#include <cmath>
#include <vector>

#include "kernels/f16.h"

namespace rw::kernels::ref {

double Dot(const float* a, const float* b, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

void MatMul(const Matrix& w, const float* x, int64_t n_tok, float* y) {
  std::vector<float> row(w.n_cols);
  for (int64_t r = 0; r < w.n_rows; ++r) {
    DequantizeRowTo(w, r, row.data());
    for (int64_t t = 0; t < n_tok; ++t) y[t * w.n_rows + r] = static_cast<float>(Dot(row.data(), x + t * w.n_cols, w.n_cols));
  }
}

void GdnHeadStep(float* M, const float* q, const float* k, const float* v, float beta, float g, int32_t S,
                 float* o) {
  auto at = [&](int i, int j) -> float& { return M[j * S + i]; };
  const double decay = std::exp(static_cast<double>(g));
  for (int i = 0; i < S; ++i)
    for (int j = 0; j < S; ++j) at(i, j) = static_cast<float>(at(i, j) * decay);
  std::vector<double> delta(S);
  for (int j = 0; j < S; ++j) {
    double kv = 0;
    for (int i = 0; i < S; ++i) kv += static_cast<double>(at(i, j)) * k[i];
    delta[j] = beta * (v[j] - kv);
  }
  for (int i = 0; i < S; ++i)
    for (int j = 0; j < S; ++j) at(i, j) = static_cast<float>(at(i, j) + static_cast<double>(k[i]) * delta[j]);
  if (o == nullptr) return;
  for (int j = 0; j < S; ++j) {
    double acc = 0;
    for (int i = 0; i < S; ++i) acc += static_cast<double>(at(i, j)) * q[i];
    o[j] = static_cast<float>(acc / std::sqrt(static_cast<double>(S)));
  }
}

void AttendOne(const float* q, int32_t D, int32_t kvh, int32_t n_keys, const KvPages& kv, float scale,
               float* out) {
  // Row p of K or V, head kvh, as floats (the scalar dequantisation twin).
  std::vector<float> row(D);
  auto load = [&](const uint8_t* const* pages, KvType t, int32_t p) -> const std::vector<float>& {
    const uint8_t* page = pages[p / kv.page_size];
    const size_t at = static_cast<size_t>(p % kv.page_size) * KvRowBytes(t, kv.row_width) +
                      KvRowBytes(t, static_cast<int64_t>(kvh) * D);
    ref::DequantizeKvRow(t, page + at, row.data(), D);
    return row;
  };
  std::vector<double> s(n_keys);
  double mx = -1e300;
  for (int32_t p = 0; p < n_keys; ++p) {
    double acc = 0;
    const std::vector<float>& k = load(kv.k_pages, kv.k_type, p);
    for (int32_t d = 0; d < D; ++d) acc += q[d] * static_cast<double>(k[d]);
    s[p] = acc * scale;
    mx = std::max(mx, s[p]);
  }
  double l = 0;
  for (int32_t p = 0; p < n_keys; ++p) {
    s[p] = std::exp(s[p] - mx);
    l += s[p];
  }
  std::vector<double> acc(D, 0.0);
  for (int32_t p = 0; p < n_keys; ++p) {
    const std::vector<float>& v = load(kv.v_pages, kv.v_type, p);
    for (int32_t d = 0; d < D; ++d) acc[d] += s[p] * v[d];
  }
  for (int32_t d = 0; d < D; ++d) out[d] = n_keys > 0 ? static_cast<float>(acc[d] / l) : 0.0f;
}

}  // namespace rw::kernels::ref
