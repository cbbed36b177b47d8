// Random-weight mmproj files of llama.cpp's qwen3vl_merger projector (the Qwen3.5 / Qwen3.6 vision tower), with
// the keys and tensor names convert_hf_to_gguf.py writes, so llama.cpp's mtmd loads them too. Presets: "tiny"
// (test fixtures) and "qwen35" (the published Qwen3.5 vision shape: 27 blocks of 1152, 16 heads, 4304 FFN, 48x48
// position table), merger output = the language model's embedding length.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/expected.h"

namespace rw::modelgen {

struct MmprojConfig {
  std::string preset;
  int64_t n_embd = 0, n_head = 0, n_ff = 0, n_layer = 0, patch_size = 16, pos_side = 0;
  int64_t n_out = 0;        // the language model's embedding length
  bool f16 = false;         // matrices in F16 (else F32); norms, biases and positions stay F32
  float weight_scale = 0.0f;  // std of random weights (0: 1/sqrt(fan_in))
};

// Preset by name ("tiny", "qwen35"); n_out is the language model's embedding length.
Expected<MmprojConfig> MmprojPreset(const std::string& name, int64_t n_out);
std::vector<std::string> MmprojPresetNames();

// Writes the file (deterministic for a seed).
Status WriteMmproj(const MmprojConfig& cfg, uint64_t seed, const std::string& path);
// The same bytes in memory (tests).
Status WriteMmprojBuffer(const MmprojConfig& cfg, uint64_t seed, std::vector<uint8_t>* out);

}  // namespace rw::modelgen
