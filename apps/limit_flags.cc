#include "apps/limit_flags.h"

#include <cstdint>

namespace rw::apps {

void LimitFlags::Register(FlagSet* flags, server::ServerConfig* c) {
  server::RequestLimits& l = c->limits;
  flags->Add("max-json-values", 0, &l.json_values,
             "JSON values (numbers, strings, array and object entries) one request body may hold");
  flags->Add("max-json-members", 0, &l.json_members, "members of any one JSON object in a request body");
  flags->Add(
      "max-grammar-elements", 0, &l.grammar_elements,
      "elements of a request's grammar after its repetitions are expanded (GBNF, JSON schema or tools)");
  flags->Add("max-grammar-rules", 0, &l.grammar_rules,
             "rules of a request's grammar after expansion (groups and repetitions count)");
  flags->Add("max-schema-nodes", 0, &l.schema_nodes,
             "JSON values of a request's JSON schema, and of all its tools' parameter schemas together");
  flags->Add("max-schema-depth", 0, &l.schema_depth, "nesting levels of a JSON schema or tool parameters");
  flags->Add("max-logit-bias", 0, &l.logit_bias, "logit_bias entries per request");
  flags->Add("max-dry-breakers", 0, &l.dry_breakers, "dry_sequence_breakers entries per request");
  flags->Add("max-dry-breaker-length", 0, &l.dry_breaker_length, "bytes of one DRY sequence breaker");
  flags->Add("max-stop", 0, &l.stop, "stop strings per request");
  flags->Add("max-stop-length", 0, &l.stop_length, "bytes of one stop string");
  flags->Add("max-tools", 0, &l.tools, "tools per request");
  flags->Add("max-top-logprobs", 0, &l.top_logprobs,
             "top_logprobs / logprobs / n_probs alternatives per token (at most 20)");
  flags->Add("responses-max", 0, &c->responses_max,
             "Responses API: stored responses kept for previous_response_id (0 = none)");
  flags->Add("responses-max-mib", 0, &responses_max_mib_,
             "Responses API: MiB of stored conversations (JSON text) kept, oldest dropped first");
  flags->Add("responses-ttl", 0, &c->responses_ttl_s, "Responses API: seconds a stored response is kept");
}

Status LimitFlags::Apply(server::ServerConfig* c) const {
  std::string bad = c->limits.Validate();
  if (!bad.empty()) return Error::InvalidArgument(bad);
  if (responses_max_mib_ < 0 || responses_max_mib_ > (int64_t{1} << 30))
    return Error::InvalidArgument("--responses-max-mib must be between 0 and 2^30");
  if (c->responses_max < 0) return Error::InvalidArgument("--responses-max must be 0 or more");
  if (c->responses_ttl_s < 1) return Error::InvalidArgument("--responses-ttl must be at least 1");
  c->responses_max_bytes = responses_max_mib_ << 20;
  return Status::Ok();
}

}  // namespace rw::apps
