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
#include <span>
#include <string>
#include <vector>

#include "base/expected.h"
#include "gpu/device.h"
#include "gpu/hazards.h"

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
  bool counted_ = false;  // in the context's allocated_bytes (a device buffer, not a staging one)
};

// Device time of one kind of command (Context::SetProfiling): how many ran and the seconds they took.
struct ProfileRow {
  std::string name;  // the shader's name (gpu/CMakeLists.txt), "copy" or "fill"
  uint64_t count = 0;
  double seconds = 0;
};

// A compute pipeline: n_buffers storage buffers at bindings 0..n-1 of set 0, push constants up to 128 bytes.
struct Pipeline {
  std::string name;  // the embedded shader's name
  VkShaderModule module = VK_NULL_HANDLE;
  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  VkPipeline pipeline = VK_NULL_HANDLE;
  uint32_t n_buffers = 0;
  uint32_t local_x = 1;  // workgroup size in x (the shader's local_size_x), for group counts
  uint32_t writable = ~0u;  // bit i: the shader may write binding i (WritableBindings, from the SPIR-V)
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
  // Device buffers allocated and not released (host-visible staging buffers are host memory: not counted).
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
  bool chooses_as_a_gpu_for_testing() const { return as_gpu_for_testing_; }
  // The shaders may use the packed 4 x int8 dot product (VK_KHR_shader_integer_dot_product), and the device says
  // it is accelerated (a GPU's dp4a; lavapipe has the instruction, emulated).
  bool has_int_dot() const { return int_dot_; }
  bool int_dot_accelerated() const { return int_dot_ && int_dot_accelerated_; }
  // A discrete GPU's device-local memory is not mapped by the host, so every transfer is staged: tests (and
  // REWIND_GPU_AS_DISCRETE=1, which also chooses kernels as a GPU does) make a unified-memory device (lavapipe)
  // leave the device buffers it allocates from now on unmapped, so that those paths run in CI.
  void UnmapDeviceBuffersForTesting(bool on) { unmap_device_buffers_ = on; }

  // Device-local storage buffer (host_visible: a mapped, coherent one; used for staging and small readbacks).
  Expected<Buffer> Alloc(size_t bytes, bool host_visible = false);
  // Upload: into a mapped `dst`, a plain copy after the recorded work is submitted (it may still read `dst`);
  // otherwise the bytes go into the context's upload arena and the copy from there is recorded, ordered before
  // the dispatches recorded after it: no submission, no allocation (the arena's space is reused after each
  // Submit; uploads over kStagingChunk go in chunks, a submission between them).
  Status Upload(Buffer& dst, const void* src, size_t bytes, size_t dst_offset = 0);
  // Download: submits the recorded work and copies out (through a reused readback buffer when `src` is not
  // mapped; in chunks of kStagingChunk).
  Status Download(const Buffer& src, void* dst, size_t bytes, size_t src_offset = 0);
  static constexpr size_t kStagingChunk = size_t{64} << 20;
  // Workgroup shared memory a device must offer (gdn_delta.comp keeps 64 state rows of up to 128 floats there).
  static constexpr uint32_t kSharedBytesNeeded = 32u << 10;
  // Frees the upload arena and the readback buffer (after submitting): a model's load stages its weights
  // through up to kStagingChunk bytes, which forwards do not need again.
  Status ReleaseStaging();
  // Submissions (each waits for the device) and staging-buffer allocations so far (tests: what a forward costs
  // in round trips on a discrete GPU).
  uint64_t submits() const { return submits_; }
  // Dispatches recorded so far, the barriers recorded before them and before copies and fills (HazardTracker), and
  // the seconds the host spent in Submit waiting for the device to run the recorded work (`rewind bench` splits
  // a decode step into recording and waiting).
  uint64_t dispatches() const { return dispatches_; }
  uint64_t barriers() const { return barriers_; }
  // Every command after a full barrier, as before the hazard tracking (REWIND_GPU_BARRIERS=all at Open; tests).
  void SetFullBarriers(bool on) { full_barriers_ = on; }
  // Tests (REWIND_GPU_VERIFY_READONLY=1 at Open): each dispatch runs alone, and the mapped bytes of every binding
  // its SPIR-V declares read-only are compared before and after it; a difference ends the process naming the
  // shader and binding (the barrier tracking relies on those declarations).
  void VerifyReadOnlyForTesting(bool on) { verify_readonly_ = on; }
  // Device time by command (`rewind bench --gpu-profile`; gpu/vk_profile.cc): a timestamp after each recorded
  // command; a command's time is from the end of the work before it to its own end, summed by name. Submits
  // what was recorded first. An error on a device whose compute queue has no timestamps.
  Status SetProfiling(bool on);
  bool profiling() const { return profiling_; }
  // What the finished commands took since the last call (largest first), and forgets it.
  std::vector<ProfileRow> TakeProfile();
  double wait_seconds() const { return static_cast<double>(wait_ns_) * 1e-9; }
  uint64_t staging_allocs() const { return staging_allocs_; }
  // Bytes Upload and Download moved between the host and the device so far (tests: what a forward or a
  // rollback sends through the host).
  uint64_t bytes_uploaded() const { return bytes_uploaded_; }
  uint64_t bytes_downloaded() const { return bytes_downloaded_; }
  // Records a fill of bytes [offset, offset + bytes) (bytes 0: to the end; both multiples of 4).
  Status Fill(Buffer& dst, uint32_t value, size_t offset = 0, size_t bytes = 0);

  // The pipeline of embedded shader `name` (gpu/shaders/CMakeLists.txt names them), built on first use.
  Expected<Pipeline*> GetPipeline(const std::string& name);

  // Records a dispatch of `groups` workgroups, after a barrier when it touches what a command recorded since the
  // last barrier wrote, or writes what one read (HazardTracker; every command with REWIND_GPU_BARRIERS=all). A count
  // over the device's limit is folded into the next dimension (x into y, y into z; that dimension must be 1):
  // shaders index with LinearX() / LinearY() (gpu/shaders/common.glsl), so an element's index is the same.
  void Dispatch(const Pipeline& p, std::initializer_list<BufferRef> buffers, const void* push, size_t push_bytes,
                uint32_t gx, uint32_t gy = 1, uint32_t gz = 1);
  // Records a buffer-to-buffer copy (ordered like a dispatch).
  void Copy(const Buffer& src, size_t src_offset, Buffer& dst, size_t dst_offset, size_t bytes);
  // Submits what was recorded and waits for it and for every earlier flushed batch (fences). No-op when nothing
  // was recorded or is running.
  Status Submit();
  // Submits what was recorded without waiting, so the device runs it while the host records what follows
  // (Dispatch flushes on its own: after kFirstFlushDispatches dispatches since the last wait, so that the device
  // starts early, then batches twice as long up to kFlushDispatches). Later work that depends on it gets a
  // barrier (HazardTracker; a barrier's first scope is all earlier work in submission order on the queue);
  // Submit waits for it.
  Status Flush();
  static constexpr uint32_t kFirstFlushDispatches = 32;
  static constexpr uint32_t kFlushDispatches = 128;
  // Batches submitted so far without a wait (Flush), for `rewind bench` and tests.
  uint64_t flushes() const { return flushes_; }

 private:
  Context() = default;
  Status BeginIfNeeded();
  Expected<uint32_t> MemoryType(uint32_t bits, bool host_visible) const;
  // The staging buffer `b` grown to hold at least `bytes` (up to kStagingChunk); recorded work is submitted first.
  Status EnsureStaging(Buffer& b, size_t bytes);
  friend class Buffer;

  DeviceInfo info_;
  bool as_gpu_for_testing_ = false;
  bool unmap_device_buffers_ = false;
  bool int_dot_ = false, int_dot_accelerated_ = false;
  Buffer upload_arena_;   // host-visible; [0, upload_used_) is read by recorded copies until the next Submit
  size_t upload_used_ = 0;
  Buffer readback_;       // host-visible
  uint64_t submits_ = 0, staging_allocs_ = 0, dispatches_ = 0, wait_ns_ = 0, flushes_ = 0, barriers_ = 0;
  HazardTracker hazards_;
  bool full_barriers_ = false;
  bool verify_readonly_ = false;
  // A barrier before the command about to be recorded when hazards_ (or full_barriers_) asks for one.
  void Order(std::span<const Access> accesses);
  VkInstance instance_ = VK_NULL_HANDLE;
  VkPhysicalDevice phys_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t queue_family_ = 0;
  VkCommandPool cmd_pool_ = VK_NULL_HANDLE;
  // Command buffers recorded and submitted in turn (Flush), each with its fence and descriptor pool; frame
  // `cur_` is the one being recorded (cmd_ and desc_pool_ are its), a frame is reused once its fence signalled.
  struct Frame {
    VkCommandBuffer cmd = VK_NULL_HANDLE;
    VkFence fence = VK_NULL_HANDLE;
    VkDescriptorPool pool = VK_NULL_HANDLE;
    bool in_flight = false;
    VkQueryPool queries = VK_NULL_HANDLE;  // profiling: timestamp 0 at the start, k after command k
    std::vector<const char*> marks;        // profiling: the name of command k + 1 (Pipeline::name or a literal)
  };
  // Profiling (gpu/vk_profile.cc).
  static constexpr uint32_t kProfileQueries = 512;
  bool profiling_ = false;
  double ts_period_ns_ = 1.0;
  uint64_t ts_mask_ = ~uint64_t{0};
  std::map<std::string, ProfileRow> profile_;
  void ProfileFrameStart(Frame& f);    // after vkBeginCommandBuffer
  void ProfileMark(const char* name);  // after recording a command (flushes first when the frame's pool is full)
  bool ProfileFull() const;            // the current frame has no query left for another command
  Status ProfileCollect(Frame& f);     // after f's fence signalled
  void DestroyProfileQueries();
  static constexpr int kFrames = 3;
  Frame frames_[kFrames];
  int cur_ = 0, in_flight_ = 0;
  uint32_t since_flush_ = 0;
  uint32_t flush_at_ = kFirstFlushDispatches;  // the dispatches of the batch being recorded before it is flushed
  VkCommandBuffer cmd_ = VK_NULL_HANDLE;
  VkDescriptorPool desc_pool_ = VK_NULL_HANDLE;
  Status WaitFrame(Frame& f);
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
  bool busy() const { return recording_ || in_flight_ > 0; }
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
