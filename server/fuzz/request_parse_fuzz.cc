// libFuzzer target (cmake -DREWIND_FUZZ=ON with clang): every request body parser must return a value or an
// ApiError for any bytes, never crash or throw.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "server/anthropic_convert.h"
#include "server/request_parse.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rw::server;
  std::string_view body(reinterpret_cast<const char*>(data), size);
  auto parsed = ParseJsonBody(body);
  if (auto* j = std::get_if<nlohmann::ordered_json>(&parsed)) {
    (void)ParseChatRequest(*j);
    (void)ParseApplyTemplateRequest(*j);
    (void)ParseCompletionRequest(*j);
    (void)ParseTokenizeRequest(*j);
    (void)ParseDetokenizeRequest(*j);
    (void)ParseAnthropicRequest(*j, size % 2 == 0);
  }
  (void)ParseSlotAction(body.substr(0, size % 8), "save", body);
  (void)IsValidUtf8(body);
  return 0;
}
