// Built without Vulkan: asking for a GPU device says so.
#include "gpu/device.h"
#include "model/forward_backend.h"

namespace rw::model {

Expected<std::unique_ptr<ForwardBackend>> MakeVulkanBackend(const ModelConfig&, const Weights&, int32_t device,
                                                            int32_t) {
  auto ctx = gpu::OpenDevice(device);  // the "built without the Vulkan backend" error
  return ctx.error();
}

}  // namespace rw::model
