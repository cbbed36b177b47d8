// --device, --n-gpu-layers/-ngl and --list-devices for the commands that run a model directly (conformance,
// bench). docs/gpu.md.
#pragma once

#include <string>

#include "base/expected.h"
#include "base/flags.h"

namespace rw::apps {

struct DeviceFlags {
  std::string device = "cpu";
  int n_gpu_layers = -1;
  bool list = false;

  void Declare(FlagSet& flags);
  // The device index for model::LoadOptions / ConformanceOptions (-1 = the CPU): --device, with -ngl 0 meaning
  // the CPU and any other -ngl passed on for the partial-offload check. Needs --device vulkanN for -ngl > 0.
  Expected<int> Resolve() const;
};

// Prints `cpu` and every Vulkan device with its name and memory (rewind --list-devices).
void PrintDevices();

}  // namespace rw::apps
