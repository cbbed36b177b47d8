// JSON shapes of OpenAI / llama-server responses built from engine results.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "server/backend.h"
#include "server/generation.h"

namespace rw::server {

nlohmann::json UsageJson(int32_t prompt_tokens, int32_t completion_tokens, int32_t cached_tokens);
// llama-server's timings object.
nlohmann::json TimingsJson(const engine::Completion& c);
// I4 cache report.
nlohmann::json CacheReportJson(const engine::CacheReport& r);
// Chat logprobs: {"content": [{token, logprob, bytes, top_logprobs: [...]}, ...]}.
nlohmann::json ChatLogprobsJson(const std::vector<TokenReport>& tokens);
// Legacy completions logprobs: {tokens, token_logprobs, top_logprobs, text_offset}.
nlohmann::json CompletionLogprobsJson(const std::vector<TokenReport>& tokens, size_t text_offset);
// llama-server's /completion `completion_probabilities` (n_probs): per token {id, token, bytes, logprob,
// top_logprobs: [{id, token, bytes, logprob}]}.
nlohmann::json LlamaProbabilitiesJson(const std::vector<TokenReport>& tokens);
// One tool call; `index` set for stream deltas.
nlohmann::json ToolCallJson(const ToolCall& call, int index, bool stream);
// A random id such as "chatcmpl-3f9c2a...".
std::string RandomId(const char* prefix);
int64_t UnixTime();

}  // namespace rw::server
