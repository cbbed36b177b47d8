#include "server/responses.h"

#include <chrono>
#include <random>

#include "base/check.h"
#include "base/hex.h"
#include "base/sha256.h"

namespace rw::server {

using nlohmann::json;

json UsageJson(int32_t prompt_tokens, int32_t completion_tokens, int32_t cached_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", cached_tokens}}}};
}

json TimingsJson(const engine::Completion& c) {
  auto per_token = [](double ms, int32_t n) { return n > 0 ? ms / n : 0.0; };
  auto per_second = [](double ms, int32_t n) { return ms > 0 ? 1e3 * n / ms : 0.0; };
  return {{"cache_n", c.cached_tokens},
          {"prompt_n", c.prompt_evaluated},
          {"prompt_ms", c.prompt_ms},
          {"prompt_per_token_ms", per_token(c.prompt_ms, c.prompt_evaluated)},
          {"prompt_per_second", per_second(c.prompt_ms, c.prompt_evaluated)},
          {"predicted_n", c.generated_tokens},
          {"predicted_ms", c.predicted_ms},
          {"predicted_per_token_ms", per_token(c.predicted_ms, c.generated_tokens)},
          {"predicted_per_second", per_second(c.predicted_ms, c.generated_tokens)},
          {"draft_n", c.drafted},
          {"draft_n_accepted", c.accepted}};
}

json CacheReportJson(const engine::CacheReport& r) {
  return {{"lcp", r.lcp},
          {"resume_pos", r.resume_pos},
          {"source", r.source},
          {"extra_tokens", r.extra_tokens},
          {"reason", r.reason},
          {"remote_bytes", r.remote_bytes},
          {"remote_ms", r.remote_ms}};
}

namespace {
json Bytes(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}
// Float logprobs go out as the double holding the exact float value: nlohmann prints the shortest text that
// round-trips, so parsing it back and converting to float gives the same bits.
double Lp(float x) { return static_cast<double>(x); }
}  // namespace

json ChatLogprobsJson(const std::vector<TokenReport>& tokens) {
  json content = json::array();
  for (const auto& t : tokens) {
    json top = json::array();
    for (const auto& [piece, lp] : t.top)
      top.push_back({{"token", piece}, {"logprob", Lp(lp)}, {"bytes", Bytes(piece)}});
    content.push_back({{"id", t.token},
                       {"token", t.piece},
                       {"logprob", Lp(t.logprob)},
                       {"bytes", Bytes(t.piece)},
                       {"top_logprobs", std::move(top)}});
  }
  return {{"content", std::move(content)}};
}

json CompletionLogprobsJson(const std::vector<TokenReport>& tokens, size_t text_offset) {
  json toks = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
  for (const auto& t : tokens) {
    toks.push_back(t.piece);
    lps.push_back(Lp(t.logprob));
    json top = json::object();
    for (const auto& [piece, lp] : t.top) {
      if (!top.contains(piece)) top[piece] = Lp(lp);
    }
    tops.push_back(std::move(top));
    offsets.push_back(text_offset);
    text_offset += t.piece.size();
  }
  return {{"tokens", toks}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

json LlamaProbabilitiesJson(const std::vector<TokenReport>& tokens) {
  json out = json::array();
  for (const auto& t : tokens) {
    json top = json::array();
    for (size_t i = 0; i < t.top.size(); ++i)
      top.push_back({{"id", i < t.top_ids.size() ? t.top_ids[i] : -1},
                     {"token", t.top[i].first},
                     {"bytes", Bytes(t.top[i].first)},
                     {"logprob", Lp(t.top[i].second)}});
    out.push_back({{"id", t.token},
                   {"token", t.piece},
                   {"bytes", Bytes(t.piece)},
                   {"logprob", Lp(t.logprob)},
                   {"top_logprobs", std::move(top)}});
  }
  return out;
}

json ToolCallJson(const ToolCall& call, int index, bool stream) {
  json j = {{"id", call.id.empty() ? RandomId("call_") : call.id},
            {"type", "function"},
            {"function", {{"name", call.name}, {"arguments", call.arguments}}}};
  if (stream) j["index"] = index;
  return j;
}

std::string RandomId(const char* prefix) {
  // 128 bits from the kernel's CSPRNG: ids such as previous_response_id are capabilities, not counters.
  uint64_t r[2] = {0, 0};
  Status st = SecureRandomBytes(r, sizeof(r));
  REWIND_CHECK_MSG(st.ok(), "getrandom failed: cannot make an unguessable id");
  return prefix + HexU64(r[0]) + HexU64(r[1]);
}

int64_t UnixTime() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace rw::server
