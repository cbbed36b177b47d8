#include "apps/sampling_flags.h"

#include <nlohmann/json.hpp>

#include "base/file.h"
#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "server/sampling_parse.h"

namespace rw::apps {
namespace {

// "a;b;;c" -> {"a", "b", "c"} (empty parts dropped).
std::vector<std::string> Split(const std::string& text, char sep) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find(sep, pos);
    std::string part = text.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    if (!part.empty()) out.push_back(part);
    if (end == std::string::npos) break;
    pos = end + 1;
  }
  return out;
}

}  // namespace

void SamplingFlags::Register(FlagSet* f) {
  f->Add("temp", 0, &temp_, "default temperature (0 = greedy)");
  f->Add("top-k", 0, &top_k_, "default top-k (0 = off)");
  f->Add("top-p", 0, &top_p_, "default top-p (1 = off)");
  f->Add("min-p", 0, &min_p_, "default min-p (0 = off)");
  f->Add("typical", 0, &typical_, "default locally typical sampling p (1 = off)");
  f->Add("top-nsigma", 0, &top_nsigma_, "default top-n-sigma (-1 = off)");
  f->Add("xtc-probability", 0, &xtc_probability_, "default XTC probability (0 = off)");
  f->Add("xtc-threshold", 0, &xtc_threshold_, "default XTC threshold (> 0.5 = off)");
  f->Add("repeat-last-n", 0, &repeat_last_n_, "tokens the penalties look back over (0 = off, -1 = context)");
  f->Add("repeat-penalty", 0, &repeat_penalty_, "default repeat penalty (1 = off)");
  f->Add("presence-penalty", 0, &presence_penalty_, "default presence penalty (0 = off)");
  f->Add("frequency-penalty", 0, &frequency_penalty_, "default frequency penalty (0 = off)");
  f->Add("dry-multiplier", 0, &dry_multiplier_, "default DRY multiplier (0 = off)");
  f->Add("dry-base", 0, &dry_base_, "default DRY base");
  f->Add("dry-allowed-length", 0, &dry_allowed_length_, "default DRY allowed length");
  f->Add("dry-penalty-last-n", 0, &dry_penalty_last_n_, "tokens DRY scans (0 = off, -1 = context)");
  f->Add("dry-sequence-breaker", 0, &dry_breakers_,
         "DRY sequence breakers, comma-separated (none: \\n : \" *; \"none\": no breakers)");
  f->Add("mirostat", 0, &mirostat_, "default mirostat (0 = off, 1 = v1, 2 = v2)");
  f->Add("mirostat-lr", 0, &mirostat_lr_, "default mirostat learning rate (eta)");
  f->Add("mirostat-ent", 0, &mirostat_ent_, "default mirostat target entropy (tau)");
  f->Add("min-keep", 0, &min_keep_, "filters keep at least this many tokens");
  f->Add("samplers", 0, &samplers_, "sampler order, ';'-separated names");
  f->Add("sampling-seq", 0, &sampling_seq_,
         "sampler order as one-letter codes (e.g. edskypmxt); overrides --samplers");
  f->Add("seed", 's', &seed_, "seed of requests without one (-1 = random per request)");
  f->Add("grammar", 0, &grammar_, "GBNF grammar every request without its own constraint follows");
  f->Add("grammar-file", 0, &grammar_file_, "file with such a grammar");
  f->Add("json-schema", 'j', &json_schema_, "JSON schema every request without its own constraint follows");
  f->Add("json-schema-file", 0, &json_schema_file_, "file with such a schema");
}

Expected<engine::SamplingParams> SamplingFlags::Resolve() const {
  engine::SamplingParams s;
  s.temperature = static_cast<float>(temp_);
  s.top_k = std::max(top_k_, 0);
  s.top_p = static_cast<float>(top_p_);
  s.min_p = static_cast<float>(min_p_);
  s.typical_p = static_cast<float>(typical_);
  s.top_n_sigma = static_cast<float>(top_nsigma_);
  s.xtc_probability = static_cast<float>(xtc_probability_);
  s.xtc_threshold = static_cast<float>(xtc_threshold_);
  s.repeat_last_n = repeat_last_n_;
  s.repeat_penalty = static_cast<float>(repeat_penalty_);
  s.presence_penalty = static_cast<float>(presence_penalty_);
  s.frequency_penalty = static_cast<float>(frequency_penalty_);
  s.dry_multiplier = static_cast<float>(dry_multiplier_);
  s.dry_base = static_cast<float>(dry_base_);
  s.dry_allowed_length = dry_allowed_length_;
  s.dry_penalty_last_n = dry_penalty_last_n_;
  s.mirostat = mirostat_;
  s.mirostat_eta = static_cast<float>(mirostat_lr_);
  s.mirostat_tau = static_cast<float>(mirostat_ent_);
  s.min_keep = min_keep_;
  if (temp_ < 0 || top_p_ <= 0 || top_p_ > 1 || min_p_ < 0 || min_p_ > 1 || repeat_penalty_ <= 0 ||
      mirostat_ < 0 || mirostat_ > 2 || repeat_last_n_ < -1 || dry_penalty_last_n_ < -1 || min_keep_ < 0)
    return Error::InvalidArgument("a sampling flag is out of range (see --help)");
  if (!dry_breakers_.empty()) {
    s.dry_sequence_breakers.clear();
    if (dry_breakers_ != "none") {
      for (std::string b : Split(dry_breakers_, ','))
        s.dry_sequence_breakers.push_back(b == "\\n" ? "\n" : b);
    }
  }
  nlohmann::ordered_json order;
  if (!sampling_seq_.empty()) {
    order = sampling_seq_;
  } else {
    order = Split(samplers_, ';');
  }
  if (auto e = server::ParseSamplerOrder(order, &s.stages)) return Error::InvalidArgument(e->message);
  std::string grammar = grammar_, schema = json_schema_;
  if (!grammar_file_.empty()) {
    REWIND_ASSIGN_OR_RETURN(grammar, ReadFileToString(grammar_file_));
  }
  if (!json_schema_file_.empty()) {
    REWIND_ASSIGN_OR_RETURN(schema, ReadFileToString(json_schema_file_));
  }
  if (!grammar.empty() && !schema.empty())
    return Error::InvalidArgument("--grammar and --json-schema exclude each other");
  if (!schema.empty()) {
    auto j = nlohmann::ordered_json::parse(schema, nullptr, false);
    if (j.is_discarded()) return Error::InvalidArgument("--json-schema is not valid JSON");
    REWIND_ASSIGN_OR_RETURN(grammar, grammar::JsonSchemaToGbnf(j));
  }
  if (!grammar.empty()) {
    auto parsed = grammar::ParseGbnf(grammar);
    if (!parsed.ok()) return parsed.error();
  }
  s.grammar = grammar;
  return s;
}

}  // namespace rw::apps
