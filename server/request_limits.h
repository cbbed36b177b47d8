// Bounds on everything a request controls (docs/limits.md). Each is a `rewind serve` flag; a request over one
// gets a 400 that names the field and the flag. The checks run on the request's own HTTP thread, before any
// work that grows with the request (a JSON DOM, a grammar, a DRY table), so a hostile request costs little
// and the engine thread only ever sees prepared, bounded work.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "server/api_error.h"

namespace rw::server {

struct RequestLimits {
  int64_t json_values = 524288;        // --max-json-values: JSON values in one request body
  int64_t json_members = 4096;         // --max-json-members: members of any one JSON object in a body
  int64_t grammar_elements = 1 << 20;  // --max-grammar-elements: GBNF elements after repeats are expanded
  int64_t grammar_rules = 1 << 16;     // --max-grammar-rules: GBNF rules (states) after expansion
  int64_t schema_nodes = 16384;        // --max-schema-nodes: JSON values of a schema (or of all tools' ones)
  int64_t schema_depth = 64;           // --max-schema-depth: nesting levels of a schema's JSON
  int64_t logit_bias = 1024;           // --max-logit-bias: logit_bias entries
  int64_t dry_breakers = 64;           // --max-dry-breakers: dry_sequence_breakers entries
  int64_t dry_breaker_length = 64;     // --max-dry-breaker-length: bytes of one breaker
  int64_t stop = 16;                   // --max-stop: stop strings
  int64_t stop_length = 1024;          // --max-stop-length: bytes of one stop string
  int64_t tools = 128;                 // --max-tools: tools of one request
  int64_t top_logprobs = 20;           // --max-top-logprobs: top_logprobs / logprobs / n_probs (at most 20)

  // A message for flags out of range ("" = fine).
  std::string Validate() const;
};

// The 400 for a field over a limit: "'field' has N entries; this server allows at most M (--flag)".
ApiError OverLimit(const std::string& field, const std::string& what, int64_t limit, const char* flag);

// A streaming pass over the body (no DOM): nesting depth, values and object members against the limits, and
// JSON syntax. Runs before the body is parsed into a DOM, so an oversized body costs one linear scan.
std::optional<ApiError> CheckJsonShape(std::string_view body, const RequestLimits& limits, int max_depth);

// A schema (json_schema, response_format, a tool's parameters) against the depth limit; adds its JSON values
// to `*nodes` and fails once they pass the node limit. `field` names the schema in the error.
std::optional<ApiError> CheckSchemaSize(const nlohmann::ordered_json& schema, const RequestLimits& limits,
                                        const std::string& field, int64_t* nodes);

}  // namespace rw::server
