// rewind serve's bounds on what a request may ask for (--max-json-values, --max-grammar-elements,
// --max-logit-bias, ...; server/request_limits.h, docs/limits.md) and the Responses API store's bounds.
#pragma once

#include "base/expected.h"
#include "base/flags.h"
#include "server/server.h"

namespace rw::apps {

class LimitFlags {
 public:
  // One flag per limit, bound to the fields of `config` (their defaults are the struct's).
  void Register(FlagSet* flags, server::ServerConfig* config);
  // After parsing: checks the values and turns --responses-max-mib into bytes.
  Status Apply(server::ServerConfig* config) const;

 private:
  int64_t responses_max_mib_ = 64;
};

}  // namespace rw::apps
