// The GPU seam: which Vulkan compute devices exist and how to open one. Nothing here includes Vulkan headers;
// a build without the Vulkan loader or glslc (CMake says so at configure time) keeps this interface and every
// call answers "built without Vulkan" (gpu/device_none.cc). docs/gpu.md.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/expected.h"

namespace rw::gpu {

struct DeviceInfo {
  int32_t index = 0;         // N of "vulkanN"
  std::string name;          // e.g. "llvmpipe (LLVM 15.0.6, 256 bits)"
  std::string type;          // "discrete", "integrated", "virtual", "cpu", "other"
  uint64_t memory_bytes = 0; // the largest device-local heap
  uint32_t api_version = 0;  // VK_MAKE_API_VERSION
};

// True when this binary has the Vulkan backend compiled in.
bool BuiltWithVulkan();

// Every Vulkan device with a compute queue, in the loader's order. An error when Vulkan is not compiled in or
// the loader finds no driver; an empty list when drivers exist but none has a compute queue.
Expected<std::vector<DeviceInfo>> ListDevices();

// "cpu" -> -1; "vulkanN" -> N (N >= 0). Anything else: a clear error listing the accepted names.
Expected<int32_t> ParseDeviceName(const std::string& name);

// One line per device for `--list-devices`: "cpu  host CPU" then "vulkanN  name  (type, X MiB)".
std::string FormatDeviceList();

class Context;  // gpu/vk_context.h

// Opens device `index` (a compute queue, a command pool, the embedded shaders compiled on first use).
Expected<std::shared_ptr<Context>> OpenDevice(int32_t index);

}  // namespace rw::gpu
