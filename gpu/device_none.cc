// A build without Vulkan (no loader, headers or glslc at configure time): the GPU seam says so.
#include "gpu/device.h"

namespace rw::gpu {

namespace {
Error NotBuilt() {
  return Error::Unsupported("this rewind was built without the Vulkan backend (install libvulkan-dev and glslc, "
                            "then reconfigure; docs/gpu.md)");
}
}  // namespace

bool BuiltWithVulkan() { return false; }
Expected<std::vector<DeviceInfo>> ListDevices() { return NotBuilt(); }
Expected<std::shared_ptr<Context>> OpenDevice(int32_t) { return NotBuilt(); }

}  // namespace rw::gpu
