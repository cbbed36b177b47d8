// A small Vulkan compute runtime: one device and compute queue, buffers (device-local, and host-visible staging
// for transfers), compute pipelines built from the SPIR-V embedded at build time (gpu/shaders/, compiled by
// glslc), and one command stream of dispatches separated by barriers, submitted and waited on with a fence.
// Internal to gpu/ and the GPU forward in model/; callers above model/ see gpu/device.h only.
#pragma once

#include <vulkan/vulkan.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/expected.h"
#include "gpu/device.h"

namespace rw::gpu {

class Context;

// A storage buffer. Move-only; released with the context that made it.
class Buffer {
 public:
  Buffer() = default;
  Buffer(Buffer&& o) noexcept { *this = std::move(o); }
  Buffer& operator=(Buffer&& o) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { Release(); }

  size_t size() const { return size_; }
  bool valid() const { return buffer_ != VK_NULL_HANDLE; }
  void* mapped() const { return mapped_; }  // host-visible buffers only
  VkBuffer handle() const { return buffer_; }

 private:
  friend class Context;
  void Release();
  Context* ctx_ = nullptr;
  VkBuffer buffer_ = VK_NULL_HANDLE;
  VkDeviceMemory memory_ = VK_NULL_HANDLE;
  size_t size_ = 0;
  void* mapped_ = nullptr;
};

// A compute pipeline: n_buffers storage buffers at bindings 0..n-1 of set 0, push constants up to 128 bytes.
struct Pipeline {
  VkShaderModule module = VK_NULL_HANDLE;
  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  VkPipeline pipeline = VK_NULL_HANDLE;
  uint32_t n_buffers = 0;
  uint32_t local_x = 1;  // workgroup size in x (the shader's local_size_x), for group counts
};

// A buffer range bound to one binding.
struct BufferRef {
  const Buffer* buffer = nullptr;
  size_t offset = 0;  // bytes, a multiple of the device's minStorageBufferOffsetAlignment
  size_t size = 0;    // 0 = to the end
};

class Context {
 public:
  static Expected<std::shared_ptr<Context>> Open(int32_t index);
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  ~Context();

  const DeviceInfo& info() const { return info_; }
  uint64_t max_buffer_bytes() const { return max_buffer_bytes_; }
  size_t offset_alignment() const { return offset_alignment_; }
  uint64_t allocated_bytes() const { return allocated_bytes_; }
  // The device's workgroup-count limit per dimension (65,535 on lavapipe and most GPUs in y and z).
  const uint32_t* max_groups() const { return max_groups_; }
  // The most loop iterations one invocation may run (summed over all its loops): lavapipe (llvmpipe) silently
  // ends a shader's loops after 65,535 back-edges, so kernels with long loops split their work into several
  // dispatches at fixed boundaries below this budget (same bits: the state between parts is in memory either
  // way). 0 = no limit (other drivers).
  uint64_t loop_budget() const { return loop_budget_; }
  // Tests: lower the limits to exercise the folds and splits on small inputs; 0 = the device's own limit.
  void LimitForTesting(uint32_t max_groups, uint64_t loop_budget, uint64_t max_buffer_bytes = 0);
  // A device whose shaders run on the host's cores (lavapipe): the kernels' kAuto choices and the top-k
  // selection take the paths that are faster there (docs/gpu.md). Tests can make it choose as a GPU does.
  bool runs_on_cpu() const { return info_.type == "cpu" && !as_gpu_for_testing_; }
  void ChooseAsAGpuForTesting(bool on) { as_gpu_for_testing_ = on; }

  // Device-local storage buffer (host_visible: a mapped, coherent one; used for staging and small readbacks).
  Expected<Buffer> Alloc(size_t bytes, bool host_visible = false);
  // Copies through a staging buffer (or directly when `dst` is mapped). Any recorded work is submitted first.
  Status Upload(Buffer& dst, const void* src, size_t bytes, size_t dst_offset = 0);
  Status Download(const Buffer& src, void* dst, size_t bytes, size_t src_offset = 0);
  // Bytes Upload and Download moved between the host and the device so far (tests: what a forward or a
  // rollback sends through the host).
  uint64_t bytes_uploaded() const { return bytes_uploaded_; }
  uint64_t bytes_downloaded() const { return bytes_downloaded_; }
  // Records a fill of bytes [offset, offset + bytes) (bytes 0: to the end; both multiples of 4).
  Status Fill(Buffer& dst, uint32_t value, size_t offset = 0, size_t bytes = 0);

  // The pipeline of embedded shader `name` (gpu/shaders/CMakeLists.txt names them), built on first use.
  Expected<Pipeline*> GetPipeline(const std::string& name);

  // Records a dispatch of `groups` workgroups; a barrier orders it after every earlier recorded dispatch. A count
  // over the device's limit is folded into the next dimension (x into y, y into z; that dimension must be 1):
  // shaders index with LinearX() / LinearY() (gpu/shaders/common.glsl), so an element's index is the same.
  void Dispatch(const Pipeline& p, std::initializer_list<BufferRef> buffers, const void* push, size_t push_bytes,
                uint32_t gx, uint32_t gy = 1, uint32_t gz = 1);
  // Records a buffer-to-buffer copy (ordered like a dispatch).
  void Copy(const Buffer& src, size_t src_offset, Buffer& dst, size_t dst_offset, size_t bytes);
  // Submits what was recorded and waits for it (a fence). No-op when nothing was recorded.
  Status Submit();

 private:
  Context() = default;
  Status BeginIfNeeded();
  Expected<uint32_t> MemoryType(uint32_t bits, bool host_visible) const;
  friend class Buffer;

  DeviceInfo info_;
  bool as_gpu_for_testing_ = false;
  VkInstance instance_ = VK_NULL_HANDLE;
  VkPhysicalDevice phys_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t queue_family_ = 0;
  VkCommandPool cmd_pool_ = VK_NULL_HANDLE;
  VkCommandBuffer cmd_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  VkDescriptorPool desc_pool_ = VK_NULL_HANDLE;
  VkPhysicalDeviceMemoryProperties mem_props_{};
  uint64_t max_buffer_bytes_ = 0;
  size_t offset_alignment_ = 16;
  uint64_t allocated_bytes_ = 0;
  uint64_t bytes_uploaded_ = 0, bytes_downloaded_ = 0;
  uint32_t max_groups_[3] = {65535, 65535, 65535};
  uint64_t loop_budget_ = 0;
  uint32_t device_max_groups_[3] = {65535, 65535, 65535};  // the device's own limits (LimitForTesting)
  uint64_t device_loop_budget_ = 0;
  uint64_t device_max_buffer_bytes_ = 0;
  bool recording_ = false;
  uint32_t sets_used_ = 0;
  std::map<std::string, std::unique_ptr<Pipeline>> pipelines_;
};

// Compiled-in SPIR-V (generated by gpu/shaders/CMakeLists.txt): nullptr when `name` is unknown.
struct ShaderBlob {
  const char* name;
  const uint32_t* words;
  size_t n_words;
};
const ShaderBlob* FindShader(const std::string& name);

}  // namespace rw::gpu
