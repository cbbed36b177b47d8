// The Vulkan compute runtime (gpu/vk_context.h).
#include "gpu/vk_context.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "base/check.h"

namespace rw::gpu {

namespace {

constexpr uint32_t kMaxBuffersPerSet = 12;
constexpr uint32_t kMaxSets = 1024;  // per submission; more dispatches submit and continue

std::string VkErr(const char* what, VkResult r) { return std::string(what) + " failed (VkResult " + std::to_string(r) + ")"; }

#define VK_TRY(call, what)                                        \
  do {                                                            \
    VkResult vk_r_ = (call);                                      \
    if (vk_r_ != VK_SUCCESS) return Error::Internal(VkErr(what, vk_r_)); \
  } while (0)

const char* TypeName(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "cpu";
    default: return "other";
  }
}

Expected<VkInstance> MakeInstance() {
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "rewind";
  app.apiVersion = VK_API_VERSION_1_2;
  VkInstanceCreateInfo ci{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  ci.pApplicationInfo = &app;
  VkInstance inst = VK_NULL_HANDLE;
  const VkResult r = vkCreateInstance(&ci, nullptr, &inst);
  if (r != VK_SUCCESS)
    return Error::Unavailable("no Vulkan driver: vkCreateInstance returned " + std::to_string(r) +
                              " (install a Vulkan driver, e.g. Debian's mesa-vulkan-drivers)");
  return inst;
}

// Physical devices with a compute queue, in the loader's order.
std::vector<std::pair<VkPhysicalDevice, uint32_t>> ComputeDevices(VkInstance inst) {
  uint32_t n = 0;
  vkEnumeratePhysicalDevices(inst, &n, nullptr);
  std::vector<VkPhysicalDevice> all(n);
  vkEnumeratePhysicalDevices(inst, &n, all.data());
  std::vector<std::pair<VkPhysicalDevice, uint32_t>> out;
  for (VkPhysicalDevice pd : all) {
    uint32_t nq = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, nullptr);
    std::vector<VkQueueFamilyProperties> qs(nq);
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, qs.data());
    for (uint32_t q = 0; q < nq; ++q)
      if (qs[q].queueFlags & VK_QUEUE_COMPUTE_BIT) {
        out.emplace_back(pd, q);
        break;
      }
  }
  return out;
}

DeviceInfo Describe(VkPhysicalDevice pd, int32_t index) {
  VkPhysicalDeviceProperties p{};
  vkGetPhysicalDeviceProperties(pd, &p);
  VkPhysicalDeviceMemoryProperties m{};
  vkGetPhysicalDeviceMemoryProperties(pd, &m);
  DeviceInfo d;
  d.index = index;
  d.name = p.deviceName;
  d.type = TypeName(p.deviceType);
  d.api_version = p.apiVersion;
  for (uint32_t h = 0; h < m.memoryHeapCount; ++h)
    if (m.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) d.memory_bytes = std::max<uint64_t>(d.memory_bytes, m.memoryHeaps[h].size);
  return d;
}

}  // namespace

bool BuiltWithVulkan() { return true; }

Expected<std::vector<DeviceInfo>> ListDevices() {
  REWIND_ASSIGN_OR_RETURN(VkInstance inst, MakeInstance());
  std::vector<DeviceInfo> out;
  const auto devs = ComputeDevices(inst);
  for (size_t i = 0; i < devs.size(); ++i) out.push_back(Describe(devs[i].first, static_cast<int32_t>(i)));
  vkDestroyInstance(inst, nullptr);
  return out;
}

// One context per device per process: models loaded one after another (tests, conformance) share its compiled
// pipelines instead of compiling every shader again. A context is used by one thread at a time (the engine's).
Expected<std::shared_ptr<Context>> OpenDevice(int32_t index) {
  static std::mutex mu;
  static std::map<int32_t, std::weak_ptr<Context>> open;
  std::lock_guard<std::mutex> lock(mu);
  if (auto c = open[index].lock()) return c;
  REWIND_ASSIGN_OR_RETURN(std::shared_ptr<Context> c, Context::Open(index));
  open[index] = c;
  return c;
}

// ---- Buffer -----------------------------------------------------------------------------------------------

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    Release();
    ctx_ = o.ctx_;
    buffer_ = o.buffer_;
    memory_ = o.memory_;
    size_ = o.size_;
    mapped_ = o.mapped_;
    counted_ = o.counted_;
    o.ctx_ = nullptr;
    o.buffer_ = VK_NULL_HANDLE;
    o.memory_ = VK_NULL_HANDLE;
    o.size_ = 0;
    o.mapped_ = nullptr;
  }
  return *this;
}

void Buffer::Release() {
  if (ctx_ == nullptr) return;
  // Recorded work may still use this buffer: run it first (freed memory would otherwise be read or written when
  // it runs: on lavapipe a buffer is host memory, and that corrupted the heap).
  if (ctx_->busy()) REWIND_CHECK_MSG(ctx_->Submit().ok(), "submitting the work recorded before a buffer's release");
  if (buffer_ != VK_NULL_HANDLE) vkDestroyBuffer(ctx_->device_, buffer_, nullptr);
  if (memory_ != VK_NULL_HANDLE) vkFreeMemory(ctx_->device_, memory_, nullptr);
  if (counted_) ctx_->allocated_bytes_ -= size_;
  ctx_ = nullptr;
  buffer_ = VK_NULL_HANDLE;
  memory_ = VK_NULL_HANDLE;
  size_ = 0;
  mapped_ = nullptr;
}

// ---- Context ----------------------------------------------------------------------------------------------

Expected<std::shared_ptr<Context>> Context::Open(int32_t index) {
  std::shared_ptr<Context> c(new Context());
  REWIND_ASSIGN_OR_RETURN(c->instance_, MakeInstance());
  const auto devs = ComputeDevices(c->instance_);
  if (index < 0 || index >= static_cast<int32_t>(devs.size()))
    return Error::NotFound("no Vulkan device vulkan" + std::to_string(index) + " (" + std::to_string(devs.size()) +
                           " found; `rewind --list-devices` lists them)");
  c->phys_ = devs[index].first;
  c->queue_family_ = devs[index].second;
  c->info_ = Describe(c->phys_, index);
  VkPhysicalDeviceProperties props{};
  vkGetPhysicalDeviceProperties(c->phys_, &props);
  c->max_buffer_bytes_ = c->device_max_buffer_bytes_ = props.limits.maxStorageBufferRange;
  c->offset_alignment_ = std::max<size_t>(16, props.limits.minStorageBufferOffsetAlignment);
  for (int d = 0; d < 3; ++d) c->max_groups_[d] = c->device_max_groups_[d] = props.limits.maxComputeWorkGroupCount[d];
  // llvmpipe's loop limiter (Mesa gallivm LP_MAX_TGSI_LOOP_ITERATIONS = 65535, counted over all loops of an
  // invocation): a margin below it for the loop bookkeeping outside the split loops.
  VkPhysicalDeviceDriverProperties drv{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
  VkPhysicalDeviceProperties2 p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  p2.pNext = &drv;
  vkGetPhysicalDeviceProperties2(c->phys_, &p2);
  if (drv.driverID == VK_DRIVER_ID_MESA_LLVMPIPE) c->loop_budget_ = c->device_loop_budget_ = 60000;
  vkGetPhysicalDeviceMemoryProperties(c->phys_, &c->mem_props_);
  // Tests: a unified-memory device (lavapipe) behaves as a discrete GPU (unmapped device buffers, so every
  // transfer is staged; kernel choices as on a GPU). docs/gpu.md "Testing".
  if (const char* e = std::getenv("REWIND_GPU_AS_DISCRETE"); e != nullptr && std::string(e) == "1") {
    c->unmap_device_buffers_ = true;
    c->as_gpu_for_testing_ = true;
  }
  if (const char* e = std::getenv("REWIND_GPU_VERIFY_READONLY"); e != nullptr && std::string(e) == "1")
    c->verify_readonly_ = true;
  // A barrier before every command, as before the hazard tracking (docs/gpu.md "Barriers"): for comparison, and
  // a way out should a device ever disagree with the tracking.
  if (const char* e = std::getenv("REWIND_GPU_BARRIERS"); e != nullptr) {
    if (std::string(e) == "all") c->full_barriers_ = true;
    else if (std::string(e) != "hazards")
      return Error::InvalidArgument(std::string("REWIND_GPU_BARRIERS must be all or hazards, not ") + e);
  }

  // Features the shaders use: 8- and 16-bit storage (GGUF blocks are read bytewise), int8 arithmetic, float64
  // (the F32/F16/BF16 dot products accumulate in double, as the CPU's reference twin does).
  VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  VkPhysicalDeviceVulkan11Features f11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  f11.pNext = &f12;
  VkPhysicalDeviceFeatures2 f2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  f2.pNext = &f11;
  vkGetPhysicalDeviceFeatures2(c->phys_, &f2);
  std::string missing;
  if (!f12.storageBuffer8BitAccess) missing += " storageBuffer8BitAccess";
  if (!f12.shaderInt8) missing += " shaderInt8";
  if (!f11.storageBuffer16BitAccess) missing += " storageBuffer16BitAccess";
  if (!f2.features.shaderFloat64) missing += " shaderFloat64";
  if (!f2.features.shaderInt64) missing += " shaderInt64";
  if (props.limits.maxComputeSharedMemorySize < kSharedBytesNeeded)
    missing += " " + std::to_string(kSharedBytesNeeded / 1024) + " KiB of workgroup shared memory (it has " +
               std::to_string(props.limits.maxComputeSharedMemorySize) + " bytes)";
  if (!missing.empty())
    return Error::Unsupported("Vulkan device " + c->info_.name + " lacks features the GPU backend needs:" + missing);
  VkPhysicalDeviceVulkan12Features e12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  e12.storageBuffer8BitAccess = VK_TRUE;
  e12.shaderInt8 = VK_TRUE;
  VkPhysicalDeviceVulkan11Features e11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  e11.storageBuffer16BitAccess = VK_TRUE;
  e11.pNext = &e12;
  VkPhysicalDeviceFeatures2 e2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  e2.features.shaderFloat64 = VK_TRUE;
  e2.features.shaderInt64 = VK_TRUE;
  e2.pNext = &e11;
  // Optional: the integer dot product of 4 packed int8 (VK_KHR_shader_integer_dot_product; the matmuls' `_dot`
  // variants, exact integers, so the same bits). Used by kAuto where the device says it is accelerated.
  std::vector<const char*> exts;
  VkPhysicalDeviceShaderIntegerDotProductFeaturesKHR edot{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES_KHR};
  {
    uint32_t ne = 0;
    vkEnumerateDeviceExtensionProperties(c->phys_, nullptr, &ne, nullptr);
    std::vector<VkExtensionProperties> have(ne);
    vkEnumerateDeviceExtensionProperties(c->phys_, nullptr, &ne, have.data());
    const bool listed = std::any_of(have.begin(), have.end(), [](const VkExtensionProperties& e) {
      return std::strcmp(e.extensionName, VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME) == 0;
    });
    if (listed) {
      VkPhysicalDeviceShaderIntegerDotProductFeaturesKHR fdot{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES_KHR};
      VkPhysicalDeviceFeatures2 q{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
      q.pNext = &fdot;
      vkGetPhysicalDeviceFeatures2(c->phys_, &q);
      VkPhysicalDeviceShaderIntegerDotProductPropertiesKHR pdot{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES_KHR};
      VkPhysicalDeviceProperties2 qp{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
      qp.pNext = &pdot;
      vkGetPhysicalDeviceProperties2(c->phys_, &qp);
      if (fdot.shaderIntegerDotProduct) {
        c->int_dot_ = true;
        c->int_dot_accelerated_ = pdot.integerDotProduct4x8BitPackedSignedAccelerated == VK_TRUE;
        edot.shaderIntegerDotProduct = VK_TRUE;
        edot.pNext = e2.pNext;
        e2.pNext = &edot;
        exts.push_back(VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME);
      }
    }
  }

  const float prio = 1.0f;
  VkDeviceQueueCreateInfo qci{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  qci.queueFamilyIndex = c->queue_family_;
  qci.queueCount = 1;
  qci.pQueuePriorities = &prio;
  VkDeviceCreateInfo dci{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  dci.pNext = &e2;
  dci.queueCreateInfoCount = 1;
  dci.pQueueCreateInfos = &qci;
  dci.enabledExtensionCount = static_cast<uint32_t>(exts.size());
  dci.ppEnabledExtensionNames = exts.data();
  VK_TRY(vkCreateDevice(c->phys_, &dci, nullptr, &c->device_), "vkCreateDevice");
  vkGetDeviceQueue(c->device_, c->queue_family_, 0, &c->queue_);

  VkCommandPoolCreateInfo pci{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pci.queueFamilyIndex = c->queue_family_;
  VK_TRY(vkCreateCommandPool(c->device_, &pci, nullptr, &c->cmd_pool_), "vkCreateCommandPool");
  VkCommandBufferAllocateInfo cai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  cai.commandPool = c->cmd_pool_;
  cai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  cai.commandBufferCount = 1;
  VkFenceCreateInfo fci{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  VkDescriptorPoolSize ps{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, kMaxSets * kMaxBuffersPerSet};
  VkDescriptorPoolCreateInfo dpi{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
  dpi.maxSets = kMaxSets;
  dpi.poolSizeCount = 1;
  dpi.pPoolSizes = &ps;
  for (Frame& f : c->frames_) {
    VK_TRY(vkAllocateCommandBuffers(c->device_, &cai, &f.cmd), "vkAllocateCommandBuffers");
    VK_TRY(vkCreateFence(c->device_, &fci, nullptr, &f.fence), "vkCreateFence");
    VK_TRY(vkCreateDescriptorPool(c->device_, &dpi, nullptr, &f.pool), "vkCreateDescriptorPool");
  }
  return c;
}

Context::~Context() {
  if (device_ != VK_NULL_HANDLE) {
    vkDeviceWaitIdle(device_);
    upload_arena_ = Buffer();  // before the device they were made on
    readback_ = Buffer();
    for (auto& [name, p] : pipelines_) {
      vkDestroyPipeline(device_, p->pipeline, nullptr);
      vkDestroyPipelineLayout(device_, p->layout, nullptr);
      vkDestroyDescriptorSetLayout(device_, p->set_layout, nullptr);
      vkDestroyShaderModule(device_, p->module, nullptr);
    }
    DestroyProfileQueries();
    for (Frame& f : frames_) {
      if (f.pool != VK_NULL_HANDLE) vkDestroyDescriptorPool(device_, f.pool, nullptr);
      if (f.fence != VK_NULL_HANDLE) vkDestroyFence(device_, f.fence, nullptr);
    }
    vkDestroyCommandPool(device_, cmd_pool_, nullptr);
    vkDestroyDevice(device_, nullptr);
  }
  if (instance_ != VK_NULL_HANDLE) vkDestroyInstance(instance_, nullptr);
}

Expected<uint32_t> Context::MemoryType(uint32_t bits, bool host_visible) const {
  const VkMemoryPropertyFlags want = host_visible
                                         ? (VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT)
                                         : VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
  // Host-visible buffers stage transfers both ways (checkpoints are downloads): cached memory where the device
  // offers it, since reading uncached (write-combined) memory from the CPU is many times slower.
  if (host_visible)
    for (uint32_t i = 0; i < mem_props_.memoryTypeCount; ++i)
      if ((bits & (1u << i)) &&
          (mem_props_.memoryTypes[i].propertyFlags & (want | VK_MEMORY_PROPERTY_HOST_CACHED_BIT)) ==
              (want | VK_MEMORY_PROPERTY_HOST_CACHED_BIT))
        return i;
  for (uint32_t i = 0; i < mem_props_.memoryTypeCount; ++i)
    if ((bits & (1u << i)) && (mem_props_.memoryTypes[i].propertyFlags & want) == want) return i;
  return Error::Unsupported("no Vulkan memory type with the needed properties");
}

Expected<Buffer> Context::Alloc(size_t bytes, bool host_visible) {
  if (bytes == 0) bytes = 16;
  if (bytes > max_buffer_bytes_)
    return Error::Exhausted("GPU buffer of " + std::to_string(bytes) + " bytes is over this device's storage buffer limit of " +
                            std::to_string(max_buffer_bytes_) + " bytes");
  Buffer b;
  VkBufferCreateInfo bci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bci.size = bytes;
  bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  bci.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VK_TRY(vkCreateBuffer(device_, &bci, nullptr, &b.buffer_), "vkCreateBuffer");
  b.ctx_ = this;
  b.size_ = bytes;
  b.counted_ = !host_visible;
  if (b.counted_) allocated_bytes_ += bytes;
  VkMemoryRequirements req{};
  vkGetBufferMemoryRequirements(device_, b.buffer_, &req);
  REWIND_ASSIGN_OR_RETURN(uint32_t type, MemoryType(req.memoryTypeBits, host_visible));
  VkMemoryAllocateInfo mai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  mai.allocationSize = req.size;
  mai.memoryTypeIndex = type;
  const VkResult r = vkAllocateMemory(device_, &mai, nullptr, &b.memory_);
  if (r != VK_SUCCESS)
    return Error::Exhausted("GPU memory allocation of " + std::to_string(bytes) + " bytes failed (VkResult " +
                            std::to_string(r) + ")");
  VK_TRY(vkBindBufferMemory(device_, b.buffer_, b.memory_, 0), "vkBindBufferMemory");
  // Unified memory (lavapipe, integrated GPUs): device-local memory the host can see is mapped too, so uploads
  // and downloads are plain copies instead of a staging buffer and a submission each.
  const VkMemoryPropertyFlags hv = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  if ((mem_props_.memoryTypes[type].propertyFlags & hv) == hv && !unmap_device_buffers_) host_visible = true;
  if (host_visible) VK_TRY(vkMapMemory(device_, b.memory_, 0, VK_WHOLE_SIZE, 0, &b.mapped_), "vkMapMemory");
  return b;
}

Status Context::WaitFrame(Frame& f) {
  if (!f.in_flight) return Status::Ok();
  const auto t0 = std::chrono::steady_clock::now();
  VK_TRY(vkWaitForFences(device_, 1, &f.fence, VK_TRUE, UINT64_MAX), "vkWaitForFences");
  wait_ns_ += static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
  f.in_flight = false;
  --in_flight_;
  return ProfileCollect(f);
}

Status Context::BeginIfNeeded() {
  if (recording_) return Status::Ok();
  Frame& f = frames_[cur_];
  REWIND_RETURN_IF_ERROR(WaitFrame(f));  // its command buffer and descriptor sets are free again
  cmd_ = f.cmd;
  desc_pool_ = f.pool;
  VK_TRY(vkResetCommandBuffer(cmd_, 0), "vkResetCommandBuffer");
  VK_TRY(vkResetDescriptorPool(device_, desc_pool_, 0), "vkResetDescriptorPool");
  sets_used_ = 0;
  since_flush_ = 0;
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  VK_TRY(vkBeginCommandBuffer(cmd_, &bi), "vkBeginCommandBuffer");
  recording_ = true;
  if (profiling_) ProfileFrameStart(f);
  return Status::Ok();
}

namespace {
void FullBarrier(VkCommandBuffer cmd) {
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                     VK_ACCESS_TRANSFER_WRITE_BIT;
  vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                       VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &mb, 0, nullptr,
                       0, nullptr);
}
}  // namespace

void Context::Order(std::span<const Access> accesses) {
  if (hazards_.Record(accesses) || full_barriers_) {
    FullBarrier(cmd_);
    ++barriers_;
  }
}

Status Context::Flush() {
  if (!recording_) return Status::Ok();
  recording_ = false;
  Frame& f = frames_[cur_];
  VK_TRY(vkEndCommandBuffer(f.cmd), "vkEndCommandBuffer");
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.commandBufferCount = 1;
  si.pCommandBuffers = &f.cmd;
  VK_TRY(vkResetFences(device_, 1, &f.fence), "vkResetFences");
  VK_TRY(vkQueueSubmit(queue_, 1, &si, f.fence), "vkQueueSubmit");
  f.in_flight = true;
  ++in_flight_;
  ++flushes_;
  flush_at_ = std::min(kFlushDispatches, 2 * flush_at_);  // the next batch: twice as long
  cur_ = (cur_ + 1) % kFrames;
  return Status::Ok();
}

Status Context::Submit() {
  if (busy()) {
    REWIND_RETURN_IF_ERROR(Flush());
    for (int i = 0; i < kFrames; ++i) REWIND_RETURN_IF_ERROR(WaitFrame(frames_[(cur_ + i) % kFrames]));  // oldest first
    ++submits_;
    upload_used_ = 0;  // the recorded copies out of the arena have run
  }
  hazards_.Clear();  // all recorded work has finished
  flush_at_ = kFirstFlushDispatches;  // the device is idle: the next batch starts it early
  return Status::Ok();
}

void Context::Dispatch(const Pipeline& p, std::initializer_list<BufferRef> buffers, const void* push,
                       size_t push_bytes, uint32_t gx, uint32_t gy, uint32_t gz) {
  // A shader variant that does not use its last bindings has them stripped from the SPIR-V: those are not bound.
  REWIND_CHECK_MSG(buffers.size() >= p.n_buffers, "dispatch with %zu buffers, pipeline takes %u", buffers.size(),
                   p.n_buffers);
  if (verify_readonly_) REWIND_CHECK(Submit().ok());  // tests: the dispatch runs alone
  if (sets_used_ >= kMaxSets || since_flush_ >= flush_at_ || ProfileFull()) REWIND_CHECK(Flush().ok());
  REWIND_CHECK(BeginIfNeeded().ok());
  VkDescriptorSetAllocateInfo ai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
  ai.descriptorPool = desc_pool_;
  ai.descriptorSetCount = 1;
  ai.pSetLayouts = &p.set_layout;
  VkDescriptorSet set = VK_NULL_HANDLE;
  REWIND_CHECK(vkAllocateDescriptorSets(device_, &ai, &set) == VK_SUCCESS);
  ++sets_used_;
  ++since_flush_;
  ++dispatches_;
  VkDescriptorBufferInfo infos[kMaxBuffersPerSet];
  VkWriteDescriptorSet writes[kMaxBuffersPerSet];
  Access access[kMaxBuffersPerSet];
  uint32_t i = 0;
  for (const BufferRef& b : buffers) {
    if (i == p.n_buffers) break;
    REWIND_CHECK(b.buffer != nullptr && b.buffer->valid());
    infos[i] = {b.buffer->handle(), b.offset, b.size == 0 ? VK_WHOLE_SIZE : b.size};
    access[i] = {reinterpret_cast<uint64_t>(b.buffer->handle()), b.offset,
                 b.size == 0 ? b.buffer->size() : b.offset + b.size, ((p.writable >> i) & 1u) != 0};
    writes[i] = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
    writes[i].dstSet = set;
    writes[i].dstBinding = i;
    writes[i].descriptorCount = 1;
    writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[i].pBufferInfo = &infos[i];
    ++i;
  }
  vkUpdateDescriptorSets(device_, i, writes, 0, nullptr);
  // Tests: the read-only bindings' bytes before the dispatch runs alone (compared after it, below).
  std::vector<std::vector<uint8_t>> kept;
  if (verify_readonly_) {  // (the device is idle: submitted at the top)
    kept.resize(i);
    uint32_t k = 0;
    for (const BufferRef& b : buffers) {
      if (k == i) break;
      bool aliased = false;  // the same bytes bound writable too: written through that binding, legitimately
      for (uint32_t j = 0; j < i; ++j) aliased = aliased || (access[j].write && HazardTracker::Conflict(access[k], access[j]));
      if (!access[k].write && !aliased && b.buffer->mapped() != nullptr) {
        const uint8_t* m = static_cast<const uint8_t*>(b.buffer->mapped());
        kept[k].assign(m + access[k].begin, m + access[k].end);
      }
      ++k;
    }
  }
  Order(std::span<const Access>(access, i));
  vkCmdBindPipeline(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, p.pipeline);
  vkCmdBindDescriptorSets(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout, 0, 1, &set, 0, nullptr);
  if (push_bytes > 0) vkCmdPushConstants(cmd_, p.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes, push);
  if (gx > max_groups_[0]) {  // a 1-D shader (LinearX): x folds into y, and y into z
    REWIND_CHECK_MSG(gy == 1 && gz == 1, "a dispatch of %u x %u x %u groups cannot fold x", gx, gy, gz);
    gy = (gx + max_groups_[0] - 1) / max_groups_[0];
    gx = max_groups_[0];
    if (gy > max_groups_[1]) {
      gz = (gy + max_groups_[1] - 1) / max_groups_[1];
      gy = max_groups_[1];
    }
  } else if (gy > max_groups_[1]) {  // rows in y (LinearY): y folds into z
    REWIND_CHECK_MSG(gz == 1, "a dispatch of %u x %u x %u groups cannot fold y", gx, gy, gz);
    gz = (gy + max_groups_[1] - 1) / max_groups_[1];
    gy = max_groups_[1];
  }
  REWIND_CHECK_MSG(gz <= max_groups_[2], "a dispatch of %u x %u x %u groups is over the device's limits", gx, gy, gz);
  if (gx > 0 && gy > 0 && gz > 0) vkCmdDispatch(cmd_, gx, gy, gz);
  if (profiling_) ProfileMark(p.name.c_str());
  if (verify_readonly_) {
    REWIND_CHECK(Submit().ok());
    uint32_t k = 0;
    for (const BufferRef& b : buffers) {
      if (k == i) break;
      if (!kept[k].empty())
        REWIND_CHECK_MSG(std::memcmp(kept[k].data(), static_cast<const uint8_t*>(b.buffer->mapped()) + access[k].begin,
                                     kept[k].size()) == 0,
                         "shader %s wrote binding %u, which its SPIR-V declares read-only", p.name.c_str(), k);
      ++k;
    }
  }
}

void Context::LimitForTesting(uint32_t max_groups, uint64_t loop_budget, uint64_t max_buffer_bytes) {
  max_buffer_bytes_ = max_buffer_bytes > 0 ? std::min(device_max_buffer_bytes_, max_buffer_bytes) : device_max_buffer_bytes_;
  for (int d = 0; d < 3; ++d)
    max_groups_[d] = max_groups > 0 ? std::min(device_max_groups_[d], max_groups) : device_max_groups_[d];
  loop_budget_ = loop_budget == 0 ? device_loop_budget_
                 : device_loop_budget_ == 0 ? loop_budget : std::min(device_loop_budget_, loop_budget);
}

void Context::Copy(const Buffer& src, size_t src_offset, Buffer& dst, size_t dst_offset, size_t bytes) {
  if (ProfileFull()) REWIND_CHECK(Flush().ok());
  REWIND_CHECK(BeginIfNeeded().ok());
  const Access access[2] = {{reinterpret_cast<uint64_t>(src.handle()), src_offset, src_offset + bytes, false},
                            {reinterpret_cast<uint64_t>(dst.handle()), dst_offset, dst_offset + bytes, true}};
  Order(access);
  VkBufferCopy region{src_offset, dst_offset, bytes};
  vkCmdCopyBuffer(cmd_, src.handle(), dst.handle(), 1, &region);
  if (profiling_) ProfileMark("copy");
}

Status Context::EnsureStaging(Buffer& b, size_t bytes) {
  if (b.valid() && b.size() >= bytes) return Status::Ok();
  REWIND_RETURN_IF_ERROR(Submit());  // recorded copies may still use the old buffer
  const size_t want = std::min(kStagingChunk, std::max({bytes, 2 * b.size(), size_t{1} << 20}));
  b = Buffer();
  REWIND_ASSIGN_OR_RETURN(b, Alloc(want, /*host_visible=*/true));
  ++staging_allocs_;
  return Status::Ok();
}

Status Context::ReleaseStaging() {
  REWIND_RETURN_IF_ERROR(Submit());
  upload_arena_ = Buffer();
  readback_ = Buffer();
  return Status::Ok();
}

Status Context::Upload(Buffer& dst, const void* src, size_t bytes, size_t dst_offset) {
  if (dst_offset + bytes > dst.size()) return Error::OutOfRange("GPU upload past the end of the buffer");
  if (bytes == 0) return Status::Ok();
  bytes_uploaded_ += bytes;
  if (dst.mapped() != nullptr) {
    REWIND_RETURN_IF_ERROR(Submit());
    std::memcpy(static_cast<uint8_t*>(dst.mapped()) + dst_offset, src, bytes);
    return Status::Ok();
  }
  const auto* s = static_cast<const uint8_t*>(src);
  for (size_t done = 0; done < bytes;) {
    const size_t n = std::min(bytes - done, kStagingChunk);
    size_t at = (upload_used_ + 15) & ~size_t{15};
    if (!upload_arena_.valid() || at + n > upload_arena_.size()) {
      REWIND_RETURN_IF_ERROR(Submit());  // the arena's recorded copies run; its space is free again
      REWIND_RETURN_IF_ERROR(EnsureStaging(upload_arena_, n));
      at = 0;
    }
    std::memcpy(static_cast<uint8_t*>(upload_arena_.mapped()) + at, s + done, n);
    Copy(upload_arena_, at, dst, dst_offset + done, n);
    upload_used_ = at + n;
    done += n;
  }
  return Status::Ok();
}

Status Context::Download(const Buffer& src, void* dst, size_t bytes, size_t src_offset) {
  if (src_offset + bytes > src.size()) return Error::OutOfRange("GPU download past the end of the buffer");
  if (bytes == 0) return Status::Ok();
  bytes_downloaded_ += bytes;
  if (src.mapped() != nullptr) {
    REWIND_RETURN_IF_ERROR(Submit());
    std::memcpy(dst, static_cast<const uint8_t*>(src.mapped()) + src_offset, bytes);
    return Status::Ok();
  }
  auto* d = static_cast<uint8_t*>(dst);
  for (size_t done = 0; done < bytes;) {
    const size_t n = std::min(bytes - done, kStagingChunk);
    REWIND_RETURN_IF_ERROR(EnsureStaging(readback_, n));
    Copy(src, src_offset + done, readback_, 0, n);
    REWIND_RETURN_IF_ERROR(Submit());
    std::memcpy(d + done, readback_.mapped(), n);
    done += n;
  }
  return Status::Ok();
}

Status Context::Fill(Buffer& dst, uint32_t value, size_t offset, size_t bytes) {
  if (ProfileFull()) REWIND_RETURN_IF_ERROR(Flush());
  REWIND_RETURN_IF_ERROR(BeginIfNeeded());
  const Access access{reinterpret_cast<uint64_t>(dst.handle()), offset, bytes == 0 ? dst.size() : offset + bytes, true};
  Order(std::span<const Access>(&access, 1));
  vkCmdFillBuffer(cmd_, dst.handle(), offset, bytes == 0 ? VK_WHOLE_SIZE : bytes, value);
  if (profiling_) ProfileMark("fill");
  return Status::Ok();
}

Expected<Pipeline*> Context::GetPipeline(const std::string& name) {
  auto it = pipelines_.find(name);
  if (it != pipelines_.end()) return it->second.get();
  const ShaderBlob* blob = FindShader(name);
  if (blob == nullptr) return Error::NotFound("no embedded GPU shader named " + name);
  // The number of bindings is read from the SPIR-V: the largest Binding decoration + 1.
  uint32_t n_bindings = 0;
  for (size_t w = 5; w < blob->n_words;) {
    const uint32_t op = blob->words[w] & 0xFFFF, len = blob->words[w] >> 16;
    if (len == 0) break;
    if (op == 71 /*OpDecorate*/ && len >= 4 && blob->words[w + 2] == 33 /*Binding*/)
      n_bindings = std::max(n_bindings, blob->words[w + 3] + 1);
    w += len;
  }
  if (n_bindings > kMaxBuffersPerSet) return Error::Internal("shader " + name + " has too many bindings");
  auto p = std::make_unique<Pipeline>();
  p->name = name;
  p->n_buffers = n_bindings;
  p->writable = WritableBindings(blob->words, blob->n_words);
  VkShaderModuleCreateInfo smi{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  smi.codeSize = blob->n_words * 4;
  smi.pCode = blob->words;
  VK_TRY(vkCreateShaderModule(device_, &smi, nullptr, &p->module), "vkCreateShaderModule");
  std::vector<VkDescriptorSetLayoutBinding> binds(n_bindings);
  for (uint32_t i = 0; i < n_bindings; ++i)
    binds[i] = {i, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
  VkDescriptorSetLayoutCreateInfo dli{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  dli.bindingCount = n_bindings;
  dli.pBindings = binds.data();
  VK_TRY(vkCreateDescriptorSetLayout(device_, &dli, nullptr, &p->set_layout), "vkCreateDescriptorSetLayout");
  VkPushConstantRange pcr{VK_SHADER_STAGE_COMPUTE_BIT, 0, 128};
  VkPipelineLayoutCreateInfo pli{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  pli.setLayoutCount = 1;
  pli.pSetLayouts = &p->set_layout;
  pli.pushConstantRangeCount = 1;
  pli.pPushConstantRanges = &pcr;
  VK_TRY(vkCreatePipelineLayout(device_, &pli, nullptr, &p->layout), "vkCreatePipelineLayout");
  VkComputePipelineCreateInfo cpi{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  cpi.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
  cpi.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  cpi.stage.module = p->module;
  cpi.stage.pName = "main";
  cpi.layout = p->layout;
  VK_TRY(vkCreateComputePipelines(device_, VK_NULL_HANDLE, 1, &cpi, nullptr, &p->pipeline), "vkCreateComputePipelines");
  Pipeline* raw = p.get();
  pipelines_[name] = std::move(p);
  return raw;
}

}  // namespace rw::gpu
