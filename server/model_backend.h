// `rewind serve` wiring: a real engine, the GGUF's tokenizer and chat template behind the server's
// interfaces. Compiled against engine/, tokenizer/, chat/ and modelgen/ when those libraries are part of the
// build; without them LoadModel answers Unavailable (the server library itself only needs engine/engine.h).
#pragma once

#include <memory>
#include <string>

#include "base/expected.h"
#include "engine/engine_config.h"
#include "server/backend.h"

namespace rw::server {

struct LoadedModel {
  std::unique_ptr<TextCodec> codec;
  std::unique_ptr<ChatFormatter> chat;
  std::unique_ptr<engine::Engine>
      engine;  // declared last: destroyed first (its thread calls into sinks only)
  Backend backend() const { return {engine.get(), codec.get(), chat.get()}; }
};

// Loads the tokenizer and template from config.model_path (the template from `chat_template_file` when
// given), then creates the engine.
Expected<LoadedModel> LoadModel(const engine::EngineConfig& config, const std::string& chat_template_file);

// The built-in demo model (generated on first use in `cache_dir`, "" = the default cache folder).
Expected<std::string> DemoModelPath(const std::string& cache_dir);

// Resident memory of this process in bytes (0 if unknown).
int64_t ResidentBytes();

}  // namespace rw::server
