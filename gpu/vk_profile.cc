// Device time by command (Context::SetProfiling; `rewind bench --gpu-profile`, docs/gpu.md "Profiling"): each
// frame's command buffer starts with a timestamp and writes one after every command it records. A timestamp at
// the bottom of the pipe is written once all work before it in submission order has finished, so the difference
// between consecutive ones is how much later the device finished that command than the work before it; commands
// without a barrier between them may overlap, and then the one that ends last gets the shared time.
#include <algorithm>
#include <string>
#include <vector>

#include "gpu/vk_context.h"

namespace rw::gpu {

Status Context::SetProfiling(bool on) {
  REWIND_RETURN_IF_ERROR(Submit());  // frames recorded with the old setting finish (and are collected) first
  if (!on) {
    profiling_ = false;
    return Status::Ok();
  }
  uint32_t nq = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(phys_, &nq, nullptr);
  std::vector<VkQueueFamilyProperties> qs(nq);
  vkGetPhysicalDeviceQueueFamilyProperties(phys_, &nq, qs.data());
  const uint32_t bits = queue_family_ < nq ? qs[queue_family_].timestampValidBits : 0;
  if (bits == 0) return Error::Unsupported("GPU profiling: the compute queue of " + info_.name + " has no timestamps");
  VkPhysicalDeviceProperties props{};
  vkGetPhysicalDeviceProperties(phys_, &props);
  ts_period_ns_ = props.limits.timestampPeriod;
  ts_mask_ = bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
  for (Frame& f : frames_) {
    if (f.queries != VK_NULL_HANDLE) continue;
    VkQueryPoolCreateInfo qi{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
    qi.queryType = VK_QUERY_TYPE_TIMESTAMP;
    qi.queryCount = kProfileQueries;
    const VkResult r = vkCreateQueryPool(device_, &qi, nullptr, &f.queries);
    if (r != VK_SUCCESS) return Error::Internal("GPU profiling: vkCreateQueryPool failed (VkResult " + std::to_string(r) + ")");
  }
  profiling_ = true;
  return Status::Ok();
}

void Context::DestroyProfileQueries() {
  for (Frame& f : frames_)
    if (f.queries != VK_NULL_HANDLE) {
      vkDestroyQueryPool(device_, f.queries, nullptr);
      f.queries = VK_NULL_HANDLE;
    }
}

void Context::ProfileFrameStart(Frame& f) {
  f.marks.clear();
  vkCmdResetQueryPool(cmd_, f.queries, 0, kProfileQueries);
  vkCmdWriteTimestamp(cmd_, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, f.queries, 0);
}

bool Context::ProfileFull() const {
  return profiling_ && recording_ && frames_[cur_].marks.size() + 1 >= kProfileQueries;
}

void Context::ProfileMark(const char* name) {
  Frame& f = frames_[cur_];
  f.marks.push_back(name);
  vkCmdWriteTimestamp(cmd_, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, f.queries, static_cast<uint32_t>(f.marks.size()));
}

Status Context::ProfileCollect(Frame& f) {
  if (f.marks.empty()) return Status::Ok();
  const uint32_t n = static_cast<uint32_t>(f.marks.size()) + 1;
  std::vector<uint64_t> ts(n);
  const VkResult r = vkGetQueryPoolResults(device_, f.queries, 0, n, n * sizeof(uint64_t), ts.data(), sizeof(uint64_t),
                                           VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
  if (r != VK_SUCCESS) return Error::Internal("GPU profiling: vkGetQueryPoolResults failed (VkResult " + std::to_string(r) + ")");
  for (uint32_t k = 1; k < n; ++k) {
    ProfileRow& row = profile_[f.marks[k - 1]];
    if (row.name.empty()) row.name = f.marks[k - 1];
    ++row.count;
    row.seconds += static_cast<double>((ts[k] - ts[k - 1]) & ts_mask_) * ts_period_ns_ * 1e-9;
  }
  f.marks.clear();
  return Status::Ok();
}

std::vector<ProfileRow> Context::TakeProfile() {
  std::vector<ProfileRow> rows;
  for (auto& [name, row] : profile_) rows.push_back(row);
  profile_.clear();
  std::sort(rows.begin(), rows.end(), [](const ProfileRow& a, const ProfileRow& b) {
    return a.seconds != b.seconds ? a.seconds > b.seconds : a.name < b.name;
  });
  return rows;
}

}  // namespace rw::gpu
