// rewind serve's sampling and grammar flags, spelled and defaulted as llama-server's (--temp, --top-k,
// --top-p,
// --min-p, --repeat-penalty, --presence-penalty, --dry-*, --mirostat*, --samplers, --grammar, ...): the
// values a request gets for the fields it leaves out.
#pragma once

#include <string>
#include <vector>

#include "base/expected.h"
#include "base/flags.h"
#include "engine/engine.h"

namespace rw::apps {

class SamplingFlags {
 public:
  void Register(FlagSet* flags);
  // The defaults the flags describe; errors: a bad value, an unreadable grammar file, an invalid grammar or
  // schema.
  Expected<engine::SamplingParams> Resolve() const;
  int64_t seed() const { return seed_; }  // -1: a random seed per request

 private:
  double temp_ = 0.8, top_p_ = 0.95, min_p_ = 0.05, typical_ = 1.0, top_nsigma_ = -1.0;
  double xtc_probability_ = 0.0, xtc_threshold_ = 0.1;
  double repeat_penalty_ = 1.0, presence_penalty_ = 0.0, frequency_penalty_ = 0.0;
  double dry_multiplier_ = 0.0, dry_base_ = 1.75;
  double mirostat_lr_ = 0.1, mirostat_ent_ = 5.0;
  int top_k_ = 40, repeat_last_n_ = 64, dry_allowed_length_ = 2, dry_penalty_last_n_ = 64, mirostat_ = 0;
  int min_keep_ = 0;
  int64_t seed_ = -1;
  std::string samplers_ = "penalties;dry;top_n_sigma;top_k;typ_p;top_p;min_p;xtc;temperature";
  std::string sampling_seq_;
  std::string dry_breakers_;
  std::string grammar_, grammar_file_, json_schema_, json_schema_file_;
};

}  // namespace rw::apps
