// The sampling and constrained-decoding fields of llama-server and OpenAI requests -> engine::SamplingParams:
// temperature, top_k, top_p, min_p, typical_p, top_n_sigma, xtc_*, repeat_*/presence/frequency penalties,
// dry_*, mirostat*, min_keep, samplers, logit_bias, n_probs, grammar, json_schema, response_format. Fields
// absent from the request keep the values already in `sampling` (the server's defaults from its flags).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/engine.h"
#include "grammar/grammar.h"
#include "server/api_error.h"
#include "server/request_limits.h"

namespace rw::server {

struct SamplingRequest {
  engine::SamplingParams params;
  // logit_bias entries keyed by text: the handler adds the bias to each token of the text's tokenisation.
  std::vector<std::pair<std::string, float>> logit_bias_text;
  int32_t n_probs = 0;  // llama-server's n_probs (top alternatives per token), 0 = none
  bool schema = false;  // params.grammar came from a JSON schema (a chat answer may reason before it)
  // params.grammar compiled (once, on the request's thread; handed to the engine). Null when there is no
  // grammar or when the grammar was rewritten after parsing (CompileGrammar then compiles the new text).
  std::shared_ptr<const grammar::Grammar> compiled;
};

// `limits`: the server's bounds (request_limits.h); a field past one is a 400 naming the flag.
std::optional<ApiError> ParseSampling(const nlohmann::ordered_json& body, SamplingRequest* out,
                                      const RequestLimits& limits = RequestLimits());

// Compiles params.grammar within the limits into `compiled` unless already done; `field` names the grammar's
// source in the error ("grammar", "json_schema", "tools"...).
std::optional<ApiError> CompileGrammar(SamplingRequest* s, const RequestLimits& limits, const std::string& field);

// The limits of a grammar as the grammar library takes them.
grammar::GbnfLimits GrammarLimits(const RequestLimits& limits);

// `samplers` as llama-server takes it: an array of names or a string of one-letter codes (e.g. "edkypmxt").
std::optional<ApiError> ParseSamplerOrder(const nlohmann::ordered_json& v,
                                          std::vector<engine::SamplerStage>* out);

}  // namespace rw::server
