// Built only while the model-based drafters are absent from this build: they report that clearly.
#include "engine/drafter.h"

namespace rw::engine {

Expected<std::unique_ptr<Drafter>> MakeMtpDrafter(model::Model&, int32_t, int32_t) {
  return Error::Unsupported("--spec mtp is not available in this build");
}

Expected<std::unique_ptr<Drafter>> MakeModelDrafter(const std::string&, model::Model&, int32_t) {
  return Error::Unsupported("--spec draft is not available in this build");
}

}  // namespace rw::engine
