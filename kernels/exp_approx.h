// exp(x) for the attention softmax: range reduction x = n·ln2 + r, a degree-6 polynomial for e^r, then the
// exponent bits (Cephes' method; about 2 ULP of the true value for x in [-87, 88]). The scalar function and
// the 8-lane AVX2 version in kernels/attention.cc run the same float operations (multiplies and adds, no FMA,
// round-to-nearest-even), so they give the same bits: a softmax may mix them (vector body, scalar tail).
// x < -87 (including -inf) gives exactly 0; x > 88 is clamped to 88.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace rw::kernels {

namespace exp_approx {
inline constexpr float kLog2e = 1.44269504088896341f;
inline constexpr float kLn2Hi = 0.693359375f;
inline constexpr float kLn2Lo = -2.12194440e-4f;
inline constexpr float kMax = 88.0f;
inline constexpr float kMin = -87.0f;
inline constexpr float kP0 = 1.9875691500e-4f;
inline constexpr float kP1 = 1.3981999507e-3f;
inline constexpr float kP2 = 8.3334519073e-3f;
inline constexpr float kP3 = 4.1665795894e-2f;
inline constexpr float kP4 = 1.6666665459e-1f;
inline constexpr float kP5 = 5.0000001201e-1f;
}  // namespace exp_approx

inline float ExpApprox(float x) {
  using namespace exp_approx;
  if (!(x >= kMin)) return 0.0f;  // also -inf and NaN
  if (x > kMax) x = kMax;
  const float n = std::nearbyint(x * kLog2e);
  float r = x - n * kLn2Hi;
  r = r - n * kLn2Lo;
  const float r2 = r * r;
  float p = kP0;
  p = p * r + kP1;
  p = p * r + kP2;
  p = p * r + kP3;
  p = p * r + kP4;
  p = p * r + kP5;
  p = p * r2 + r;
  p = p + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return p * scale;
}

}  // namespace rw::kernels
