// libFuzzer target (cmake -DREWIND_FUZZ=ON with clang): every request parser of every endpoint must return a
// value or an ApiError for any bytes, never crash, throw or run past its limits. The first byte picks the
// limits: the defaults, or small ones (so the fuzzer reaches the over-limit paths with short inputs).
//   chat, apply-template, completions, /completion, tokenize, detokenize, Anthropic messages and
//   count_tokens, Responses (with a stored response to continue), slot actions, and the JSON body scan
//   itself.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "server/anthropic_convert.h"
#include "server/request_parse.h"
#include "server/responses_api.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rw::server;
  if (size == 0) return 0;
  RequestLimits limits;
  if (data[0] & 1) {
    limits.json_values = 64;
    limits.json_members = 8;
    limits.grammar_elements = 256;
    limits.grammar_rules = 32;
    limits.schema_nodes = 16;
    limits.schema_depth = 4;
    limits.logit_bias = 2;
    limits.dry_breakers = 2;
    limits.dry_breaker_length = 4;
    limits.stop = 2;
    limits.stop_length = 4;
    limits.tools = 2;
    limits.top_logprobs = 3;
  }
  const ParseOptions options(rw::engine::SamplingParams(), limits);
  std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  auto parsed = ParseJsonBody(body, limits);
  if (auto* j = std::get_if<nlohmann::ordered_json>(&parsed)) {
    (void)ParseChatRequest(*j, options);
    (void)ParseApplyTemplateRequest(*j, limits);
    (void)ParseCompletionRequest(*j, options);
    (void)ParseTokenizeRequest(*j);
    (void)ParseDetokenizeRequest(*j);
    (void)ParseAnthropicRequest(*j, (data[0] & 2) != 0, options);
    static ResponseStore* store = [] {
      auto* s = new ResponseStore();
      s->Put("resp_1", "", nlohmann::ordered_json::array({{{"role", "user"}, {"content", "hi"}}}));
      return s;
    }();
    auto r = ParseResponsesRequest(*j, *store, "");
    if (auto* rr = std::get_if<ResponsesRequest>(&r)) (void)ParseChatRequest(rr->chat_body, options);
  }
  (void)ParseSlotAction(body.substr(0, size % 8), (data[0] & 2) ? "save" : "restore", body);
  (void)IsValidUtf8(body);
  return 0;
}
