// A build without the Vulkan backend: the GPU seam answers with a clear error, and the GPU tests say why they
// do not run.
#include <gtest/gtest.h>

#include "gpu/device.h"

namespace rw::gpu {
namespace {

TEST(GpuDevice, ABuildWithoutVulkanSaysSoInsteadOfListingDevices) {
  EXPECT_FALSE(BuiltWithVulkan());
  auto d = ListDevices();
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().message.find("without the Vulkan backend"), std::string::npos);
  EXPECT_FALSE(OpenDevice(0).ok());
  GTEST_SKIP() << "built without Vulkan: the GPU kernel tests are not compiled (docs/gpu.md)";
}

}  // namespace
}  // namespace rw::gpu
