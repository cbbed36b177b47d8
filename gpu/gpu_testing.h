// Helpers of the GPU kernel tests: the first Vulkan device (a test skips with the reason when there is none) and
// host <-> device copies of small vectors.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "gpu/device.h"
#include "gpu/vk_context.h"

namespace rw::gpu::testing {

inline std::shared_ptr<Context> Device(std::string* why) {
  auto c = OpenDevice(0);
  if (!c.ok()) {
    *why = c.error().message;
    return nullptr;
  }
  return *c;
}

template <typename T>
Buffer Up(Context& c, const std::vector<T>& v) {
  auto b = c.Alloc(sizeof(T) * v.size());
  EXPECT_TRUE(b.ok());
  EXPECT_TRUE(c.Upload(*b, v.data(), sizeof(T) * v.size()).ok());
  return std::move(*b);
}

template <typename T = float>
std::vector<T> Down(Context& c, const Buffer& b, size_t n) {
  std::vector<T> v(n);
  EXPECT_TRUE(c.Download(b, v.data(), sizeof(T) * n).ok());
  return v;
}

}  // namespace rw::gpu::testing

// Declares `ctx` (a std::shared_ptr<Context>) or skips the test with the reason there is no device.
#define REQUIRE_DEVICE(ctx)                                             \
  std::string why_;                                                     \
  std::shared_ptr<Context> ctx = ::rw::gpu::testing::Device(&why_);     \
  if (!ctx) GTEST_SKIP() << "no Vulkan device: " << why_
