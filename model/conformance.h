// Conformance against llama.cpp reference outputs (fixture layout: ../shared/fixtures/llama-ref/README.md):
// DIR/prompts.json, DIR/ref/<model>/manifest.json + <case>.f32, DIR/models/<model file>. Used by
// `rewind conformance` and the golden tests. Tolerances: docs/conformance.md.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "base/expected.h"

namespace rw::model {

struct ConformanceOptions {
  std::string dir;
  std::string model_filter;  // ref folder name or model file name; empty = all
  std::string case_filter;   // case name; empty = all
  int32_t n_threads = 1;
  int32_t greedy_steps = -1; // -1: as many as the reference has
  int32_t device = -1;       // -1: the CPU; N: Vulkan device N (models the GPU cannot run are skipped, with why)
  int32_t n_gpu_layers = -1; // with a device: layers on it (-1 = all; fewer is an error for now)
  bool kv_f16 = false;       // F16 KV cache (the serving default; references used F32): F32 tolerance 2e-2.
                             // A reference made with a quantised KV cache (its manifest's type_k / type_v) is
                             // always run with those types.
};

enum class Precision { kF32, kQ8_0, kQ4K, k16Bit, kOther };

struct CaseResult {
  std::string model, name;
  int32_t rows = 0;               // stored logit rows compared
  int32_t rows_excluded = 0;      // rows after a MoE router near-tie
  double max_abs = 0, mean_abs = 0;
  int32_t top1_agree = 0;         // rows with the same argmax
  int32_t top1_checked = 0;       // rows whose reference margin > 1.0
  int32_t top1_checked_agree = 0;
  int32_t greedy_compared = 0;    // steps that must match (before the first low-margin step)
  int32_t greedy_match = 0;       // leading steps that matched
  int32_t greedy_total = 0;       // steps generated
  double decode_max_abs = 0;      // |Δ| of the reference top-8 logits along the matching greedy path
  bool pass = false;
  std::string why;                // failure reason
};

struct ModelResult {
  std::string model;      // ref folder name
  std::string file;       // model file
  std::string kv_type;    // the KV cache types run ("f32", "q8_0", "q8_0/f16")
  bool skipped = false;
  std::string skip_reason;
  Precision precision = Precision::kOther;
  double max_abs = 0, mean_abs = 0;
  int64_t rows = 0;
  std::vector<CaseResult> cases;
  bool pass = false;
  std::string why;
};

// Runs every selected model; on_case is called after each case (for streaming output).
Expected<std::vector<ModelResult>> RunConformance(const ConformanceOptions& options,
                                                  const std::function<void(const CaseResult&)>& on_case = {});

std::string FormatCase(const CaseResult& r);
std::string FormatModel(const ModelResult& r);

}  // namespace rw::model
