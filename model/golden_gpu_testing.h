// Helpers of the GPU golden tests (golden_gpu_test.cc, golden_gpu_transfer_test.cc): whether a Vulkan device
// exists, and the golden model files loaded on vulkan0.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "gpu/device.h"
#include "model/forward.h"

namespace rw::model {

inline bool HaveDevice(std::string* why) {
  auto d = gpu::ListDevices();
  if (!d.ok()) {
    *why = d.error().message;
    return false;
  }
  if (d->empty()) *why = "the Vulkan loader found no device";
  return !d->empty();
}

// A golden model file on vulkan0 (null after a failed expectation).
inline std::unique_ptr<Model> LoadOnVulkan0(const std::string& file) {
  LoadOptions lo;
  lo.device = 0;
  auto loaded = Model::Load(std::string(REWIND_TEST_DATA) + "/golden/models/" + file, lo);
  EXPECT_TRUE(loaded.ok()) << file << ": " << loaded.error().message;
  return loaded.ok() ? std::move(*loaded) : nullptr;
}
inline std::unique_ptr<Model> LoadQ8OnVulkan0() { return LoadOnVulkan0("tiny-qwen35-q8_0.gguf"); }

// tiny-qwen35-q8_0 loaded on vulkan0 with the environment switch `var` set to `value` for the load (the GPU
// backend reads its switches, REWIND_GPU_ATTENTION and the like, at load); the run's own value is restored after.
inline Expected<std::unique_ptr<Model>> LoadQ8WithSwitch(const char* var, const char* value) {
  const char* set = std::getenv(var);
  const std::string before = set != nullptr ? set : "";
  EXPECT_EQ(0, setenv(var, value, 1));
  LoadOptions lo;
  lo.device = 0;
  auto loaded = Model::Load(std::string(REWIND_TEST_DATA) + "/golden/models/tiny-qwen35-q8_0.gguf", lo);
  if (set != nullptr) {
    setenv(var, before.c_str(), 1);
  } else {
    unsetenv(var);
  }
  return loaded;
}

}  // namespace rw::model
