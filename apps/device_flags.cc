#include "apps/device_flags.h"

#include <cstdio>

#include "gpu/device.h"

namespace rw::apps {

void DeviceFlags::Declare(FlagSet& flags) {
  flags.Add("device", 0, &device, "where the forward runs: cpu or vulkanN (see --list-devices)");
  flags.Alias("-dev", "device");
  flags.Add("n-gpu-layers", 0, &n_gpu_layers,
            "layers on the GPU device: 0 = the CPU, -1 or >= the layer count = the whole model; partial offload "
            "is not supported yet");
  flags.Alias("-ngl", "n-gpu-layers");
  flags.Add("list-devices", 0, &list, "list the devices (cpu, vulkanN with name and memory) and exit");
}

Expected<int> DeviceFlags::Resolve() const {
  REWIND_ASSIGN_OR_RETURN(int32_t index, gpu::ParseDeviceName(device));
  if (n_gpu_layers == 0) return -1;
  if (index < 0 && n_gpu_layers > 0)
    return Error::InvalidArgument("--n-gpu-layers " + std::to_string(n_gpu_layers) +
                                  " needs a GPU device: add --device vulkanN (rewind --list-devices)");
  return index;
}

void PrintDevices() { std::printf("%s", gpu::FormatDeviceList().c_str()); }

}  // namespace rw::apps
