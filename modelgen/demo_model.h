// The built-in demo model: the `tiny` preset generated on first use from a vocab compiled into the binary, so
// `rewind serve` works with no model file and no network.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "base/expected.h"

namespace rw::modelgen {

// The demo model's declared training context, so that `rewind serve` (-c 0: the training context) takes a
// coding agent's prompt (15-20K tokens with its system prompt and tools) and a long session after it. The
// model is tiny: a 64K context needs 64 MiB of attention KV per slot at f16 (printed at load).
inline constexpr int64_t kDemoContext = 65536;

// The embedded tests/data/vocab/tiny-qwen35-vocab.gguf.
std::span<const uint8_t> TinyVocabGguf();

// Path of the demo model (tiny preset, default seed, `file_type` "f32" or "q8_0") in `cache_dir` (empty:
// CacheRoot(), base/cache_root.h). Generates it on first use (~21 MB F32, ~6 MB Q8_0, 1-2 s); later calls
// reuse the file when its size and content hash match what was recorded when it was generated.
Expected<std::string> EnsureDemoModel(std::string cache_dir = "", const std::string& file_type = "f32");

}  // namespace rw::modelgen
