// Device names and the device list, with or without the Vulkan backend compiled in (gpu/device.h).
#include <cstdio>
#include <string>

#include "gpu/device.h"

namespace rw::gpu {

Expected<int32_t> ParseDeviceName(const std::string& name) {
  if (name == "cpu") return -1;
  const std::string prefix = "vulkan";
  if (name.size() > prefix.size() && name.compare(0, prefix.size(), prefix) == 0) {
    const std::string digits = name.substr(prefix.size());
    if (digits.size() <= 4 && digits.find_first_not_of("0123456789") == std::string::npos)
      return static_cast<int32_t>(std::stoi(digits));
  }
  return Error::InvalidArgument("unknown device '" + name + "': use cpu or vulkanN (N from `rewind --list-devices`)");
}

std::string FormatDeviceList() {
  std::string out = "cpu       host CPU (always available)\n";
  auto devs = ListDevices();
  if (!devs.ok()) return out + "(no Vulkan devices: " + devs.error().message + ")\n";
  if (devs->empty()) return out + "(no Vulkan device has a compute queue)\n";
  for (const DeviceInfo& d : *devs) {
    char line[512];
    std::snprintf(line, sizeof(line), "vulkan%-3d %s  (%s, %llu MiB)\n", d.index, d.name.c_str(), d.type.c_str(),
                  static_cast<unsigned long long>(d.memory_bytes >> 20));
    out += line;
  }
  return out;
}

}  // namespace rw::gpu
