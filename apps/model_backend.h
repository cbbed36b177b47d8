// `rewind serve` wiring: a real engine, the GGUF's tokenizer and chat template behind the server's interfaces
// (server/backend.h). It lives in apps/ so that the server library needs the engine's interface (engine/engine.h)
// and grammar/ only, never the engine, model, tokenizer, chat or modelgen libraries.
#pragma once

#include <memory>
#include <string>

#include "base/expected.h"
#include "engine/engine_config.h"
#include "server/backend.h"
#include "vision/image_pipeline.h"

namespace rw::apps {

struct LoadedModel {
  std::unique_ptr<server::TextCodec> codec;
  std::unique_ptr<server::ChatFormatter> chat;
  std::unique_ptr<vision::ImagePipeline> images;  // --mmproj (null: none)
  std::unique_ptr<engine::Engine>
      engine;  // declared last: destroyed first (its thread calls into sinks only)
  server::Backend backend() const { return {engine.get(), codec.get(), chat.get(), images.get()}; }
};

// Loads the tokenizer and template from config.model_path (the template from `chat_template_file` when
// given), then creates the engine.
Expected<LoadedModel> LoadModel(const engine::EngineConfig& config, const std::string& chat_template_file);

// The built-in demo model (generated on first use in `cache_dir`, "" = the default cache folder).
Expected<std::string> DemoModelPath(const std::string& cache_dir);

// Resident memory of this process in bytes (0 if unknown).
int64_t ResidentBytes();

}  // namespace rw::apps
