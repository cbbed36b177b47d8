#include "server/sampling_parse.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <map>

#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"

namespace rw::server {
namespace {

using json = nlohmann::ordered_json;
using Err = std::optional<ApiError>;
using engine::SamplerStage;

const json* Field(const json& obj, const char* name) {
  auto it = obj.find(name);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

ApiError Bad(const std::string& field, const std::string& what) {
  return ApiError::BadRequest("'" + field + "' " + what, field);
}

Err Float(const json& body, const char* name, double lo, double hi, float* out) {
  const json* v = Field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_number()) return Bad(name, "must be a number");
  const double d = v->get<double>();
  if (!std::isfinite(d) || d < lo || d > hi) {
    char buf[96];
    std::snprintf(buf, sizeof(buf), "must be between %g and %g", lo, hi);
    return Bad(name, buf);
  }
  *out = static_cast<float>(d);
  return std::nullopt;
}

Err Int(const json& body, const char* name, int64_t lo, int64_t hi, int32_t* out) {
  const json* v = Field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_number() || (v->is_number_float() && v->get<double>() != std::floor(v->get<double>())))
    return Bad(name, "must be an integer");
  const double d = v->get<double>();
  if (d < static_cast<double>(lo) || d > static_cast<double>(hi))
    return Bad(name, "must be between " + std::to_string(lo) + " and " + std::to_string(hi));
  *out = static_cast<int32_t>(d);
  return std::nullopt;
}

#define RETURN_IF_ERR(expr)           \
  do {                                \
    if (auto _e = (expr)) return *_e; \
  } while (0)

// One logit_bias entry: a bias number, or false (ban the token), as llama-server accepts.
Err BiasValue(const json& v, float* out) {
  if (v.is_boolean()) {
    if (v.get<bool>()) return Bad("logit_bias", "values must be numbers or false");
    *out = -std::numeric_limits<float>::infinity();
    return std::nullopt;
  }
  if (!v.is_number() || !std::isfinite(v.get<double>()))
    return Bad("logit_bias", "values must be numbers or false");
  *out = static_cast<float>(v.get<double>());
  return std::nullopt;
}

// A key of logit_bias: a token id (integer, or a string of digits as OpenAI sends) or text.
Err BiasKey(const json& k, SamplingRequest* out, float bias) {
  if (k.is_number_integer()) {
    const int64_t id = k.get<int64_t>();
    if (id < 0 || id > std::numeric_limits<int32_t>::max())
      return Bad("logit_bias", "has a negative token id");
    out->params.logit_bias.push_back({static_cast<int32_t>(id), bias});
    return std::nullopt;
  }
  if (!k.is_string()) return Bad("logit_bias", "keys must be token ids or strings");
  const std::string s = k.get<std::string>();
  bool digits = !s.empty() && s.size() <= 9 && s.find_first_not_of("0123456789") == std::string::npos;
  if (digits)
    out->params.logit_bias.push_back({std::stoi(s), bias});
  else if (!s.empty())
    out->logit_bias_text.push_back({s, bias});
  return std::nullopt;
}

Err LogitBias(const json& v, SamplingRequest* out, const RequestLimits& limits) {
  if ((v.is_object() || v.is_array()) && static_cast<int64_t>(v.size()) > limits.logit_bias)
    return OverLimit("logit_bias", "has " + std::to_string(v.size()) + " entries", limits.logit_bias,
                     "--max-logit-bias");
  if (v.is_object()) {
    for (auto it = v.begin(); it != v.end(); ++it) {
      float bias = 0;
      RETURN_IF_ERR(BiasValue(it.value(), &bias));
      RETURN_IF_ERR(BiasKey(json(it.key()), out, bias));
    }
    return std::nullopt;
  }
  if (!v.is_array()) return Bad("logit_bias", "must be an object or an array of [token, bias] pairs");
  for (const auto& e : v) {
    if (!e.is_array() || e.size() != 2)
      return Bad("logit_bias", "array entries must be [token or text, bias]");
    float bias = 0;
    RETURN_IF_ERR(BiasValue(e[1], &bias));
    RETURN_IF_ERR(BiasKey(e[0], out, bias));
  }
  return std::nullopt;
}

// The grammar of the request: `grammar` (GBNF), `json_schema`, or `response_format` (json_object /
// json_schema).
Err Constraint(const json& body, SamplingRequest* out, const RequestLimits& limits) {
  std::string grammar;
  if (const json* g = Field(body, "grammar")) {
    if (!g->is_string()) return Bad("grammar", "must be a string (GBNF)");
    grammar = g->get<std::string>();
  }
  std::optional<json> schema;
  std::string schema_field = "json_schema";
  if (const json* s = Field(body, "json_schema")) schema = *s;
  if (const json* rf = Field(body, "response_format")) {
    if (!rf->is_object()) return Bad("response_format", "must be an object");
    const json* t = Field(*rf, "type");
    const std::string type = t && t->is_string() ? t->get<std::string>() : "";
    if (type == "json_object") {
      schema = rf->contains("schema") && (*rf)["schema"].is_object() ? (*rf)["schema"] : json::object();
      schema_field = "response_format";
    } else if (type == "json_schema") {
      const json* js = Field(*rf, "json_schema");
      if (!js || !js->is_object())
        return Bad("response_format", "of type json_schema needs a 'json_schema' object");
      const json* s = Field(*js, "schema");
      if (s && !s->is_object() && !s->is_boolean())
        return Bad("response_format", "json_schema.schema must be an object");
      schema = s ? *s : json::object();
      schema_field = "response_format";
      // `strict`: the output always follows the schema here, strict or not.
      if (const json* st = Field(*js, "strict"); st && !st->is_boolean())
        return Bad("response_format", "json_schema.strict must be a boolean");
    } else if (type != "text") {
      return Bad("response_format", "type must be text, json_object or json_schema");
    }
  }
  if (schema && !grammar.empty()) return Bad("grammar", "cannot be combined with a JSON schema");
  if (!schema && grammar.empty())
    return std::nullopt;  // no constraint of its own: the server's (if any) stays
  if (schema) {
    int64_t nodes = 0;
    RETURN_IF_ERR(CheckSchemaSize(*schema, limits, schema_field, &nodes));
    json s = *schema;
    if (s.is_object() && s.empty()) s = json{{"type", "object"}};  // "any JSON object", as llama-server
    auto g = grammar::JsonSchemaToGbnf(s);
    if (!g.ok()) return ApiError::BadRequest(g.error().message, schema_field);
    grammar = *g;
    out->schema = true;
  }
  out->params.grammar = std::move(grammar);
  out->compiled = nullptr;
  return CompileGrammar(out, limits, schema ? schema_field : "grammar");
}

}  // namespace

Err ParseSamplerOrder(const json& v, std::vector<SamplerStage>* out) {
  static const std::map<std::string, SamplerStage> names = {{"penalties", SamplerStage::kPenalties},
                                                            {"dry", SamplerStage::kDry},
                                                            {"top_n_sigma", SamplerStage::kTopNSigma},
                                                            {"top-n-sigma", SamplerStage::kTopNSigma},
                                                            {"topnsigma", SamplerStage::kTopNSigma},
                                                            {"top_k", SamplerStage::kTopK},
                                                            {"top-k", SamplerStage::kTopK},
                                                            {"topk", SamplerStage::kTopK},
                                                            {"typ_p", SamplerStage::kTypicalP},
                                                            {"typ-p", SamplerStage::kTypicalP},
                                                            {"typp", SamplerStage::kTypicalP},
                                                            {"typ", SamplerStage::kTypicalP},
                                                            {"typical_p", SamplerStage::kTypicalP},
                                                            {"top_p", SamplerStage::kTopP},
                                                            {"top-p", SamplerStage::kTopP},
                                                            {"topp", SamplerStage::kTopP},
                                                            {"nucleus", SamplerStage::kTopP},
                                                            {"min_p", SamplerStage::kMinP},
                                                            {"min-p", SamplerStage::kMinP},
                                                            {"minp", SamplerStage::kMinP},
                                                            {"xtc", SamplerStage::kXtc},
                                                            {"temperature", SamplerStage::kTemperature},
                                                            {"temp", SamplerStage::kTemperature}};
  static const std::map<char, SamplerStage> chars = {
      {'e', SamplerStage::kPenalties}, {'d', SamplerStage::kDry},      {'s', SamplerStage::kTopNSigma},
      {'k', SamplerStage::kTopK},      {'y', SamplerStage::kTypicalP}, {'p', SamplerStage::kTopP},
      {'m', SamplerStage::kMinP},      {'x', SamplerStage::kXtc},      {'t', SamplerStage::kTemperature}};
  out->clear();
  if (v.is_string()) {
    for (char c : v.get<std::string>()) {
      auto it = chars.find(c);
      if (it == chars.end()) return Bad("samplers", std::string("has an unknown sampler code '") + c + "'");
      out->push_back(it->second);
    }
    return std::nullopt;
  }
  if (!v.is_array()) return Bad("samplers", "must be an array of names or a string of codes");
  for (const auto& n : v) {
    if (!n.is_string()) return Bad("samplers", "must list sampler names");
    auto it = names.find(n.get<std::string>());
    if (it == names.end()) return Bad("samplers", "has an unknown sampler '" + n.get<std::string>() + "'");
    out->push_back(it->second);
  }
  return std::nullopt;
}

grammar::GbnfLimits GrammarLimits(const RequestLimits& limits) {
  grammar::GbnfLimits g;
  g.max_elements = static_cast<size_t>(limits.grammar_elements);
  g.max_rules = static_cast<size_t>(limits.grammar_rules);
  return g;
}

Err CompileGrammar(SamplingRequest* s, const RequestLimits& limits, const std::string& field) {
  if (s->params.grammar.empty() || s->compiled) return std::nullopt;
  auto parsed = grammar::ParseGbnf(s->params.grammar, "root", GrammarLimits(limits));
  if (!parsed.ok()) {
    ApiError e = ApiError::BadRequest(parsed.error().message, field);
    if (parsed.error().kind == ErrorKind::kOutOfRange) {
      e.message = "'" + field + "': " + e.message + "; this server allows at most " +
                  std::to_string(limits.grammar_elements) + " elements and " +
                  std::to_string(limits.grammar_rules) + " rules (--max-grammar-elements, --max-grammar-rules)";
      e.code = "limit_exceeded";
    }
    return e;
  }
  // The matcher's first state, built here on the request's thread: a grammar whose state alone passes the
  // matcher's bounds (a long chain of rules each starting with the next) is refused, not sent to the engine.
  if (grammar::Matcher(*parsed, 1).overflowed()) {
    ApiError e = ApiError::BadRequest("'" + field + "': the grammar's rules nest too deeply at its start (its "
                                          "matcher state would pass " +
                                          std::to_string(grammar::Matcher::kMaxStateEntries) + " entries)",
                                      field);
    e.code = "limit_exceeded";
    return e;
  }
  s->compiled = *parsed;
  return std::nullopt;
}

Err ParseSampling(const json& body, SamplingRequest* out, const RequestLimits& limits) {
  engine::SamplingParams& s = out->params;
  RETURN_IF_ERR(Float(body, "temperature", 0.0, 100.0, &s.temperature));
  RETURN_IF_ERR(Float(body, "top_p", 0.0, 1.0, &s.top_p));
  RETURN_IF_ERR(Int(body, "top_k", -1, 1 << 30, &s.top_k));
  if (s.top_k < 0) s.top_k = 0;
  RETURN_IF_ERR(Float(body, "min_p", 0.0, 1.0, &s.min_p));
  RETURN_IF_ERR(Float(body, "typical_p", 0.0, 1.0, &s.typical_p));
  RETURN_IF_ERR(Float(body, "top_n_sigma", -1.0, 100.0, &s.top_n_sigma));
  RETURN_IF_ERR(Float(body, "xtc_probability", 0.0, 1.0, &s.xtc_probability));
  RETURN_IF_ERR(Float(body, "xtc_threshold", 0.0, 1.0, &s.xtc_threshold));
  RETURN_IF_ERR(Int(body, "repeat_last_n", -1, 1 << 20, &s.repeat_last_n));
  RETURN_IF_ERR(Float(body, "repeat_penalty", 0.0, 100.0, &s.repeat_penalty));
  if (s.repeat_penalty <= 0) return Bad("repeat_penalty", "must be greater than 0");
  RETURN_IF_ERR(Float(body, "presence_penalty", -2.0, 2.0, &s.presence_penalty));
  RETURN_IF_ERR(Float(body, "frequency_penalty", -2.0, 2.0, &s.frequency_penalty));
  RETURN_IF_ERR(Float(body, "dry_multiplier", 0.0, 100.0, &s.dry_multiplier));
  RETURN_IF_ERR(Float(body, "dry_base", 0.0, 100.0, &s.dry_base));
  RETURN_IF_ERR(Int(body, "dry_allowed_length", 0, 1 << 20, &s.dry_allowed_length));
  RETURN_IF_ERR(Int(body, "dry_penalty_last_n", -1, 1 << 20, &s.dry_penalty_last_n));
  if (const json* b = Field(body, "dry_sequence_breakers")) {
    if (!b->is_array()) return Bad("dry_sequence_breakers", "must be an array of strings");
    if (static_cast<int64_t>(b->size()) > limits.dry_breakers)
      return OverLimit("dry_sequence_breakers", "has " + std::to_string(b->size()) + " entries",
                       limits.dry_breakers, "--max-dry-breakers");
    s.dry_sequence_breakers.clear();
    for (const auto& x : *b) {
      if (!x.is_string() || x.get<std::string>().empty())
        return Bad("dry_sequence_breakers", "must be an array of non-empty strings");
      if (static_cast<int64_t>(x.get_ref<const std::string&>().size()) > limits.dry_breaker_length)
        return OverLimit("dry_sequence_breakers",
                         "has a breaker of " + std::to_string(x.get_ref<const std::string&>().size()) + " bytes",
                         limits.dry_breaker_length, "--max-dry-breaker-length");
      s.dry_sequence_breakers.push_back(x.get<std::string>());
    }
  }
  RETURN_IF_ERR(Int(body, "mirostat", 0, 2, &s.mirostat));
  RETURN_IF_ERR(Float(body, "mirostat_tau", 0.0, 100.0, &s.mirostat_tau));
  RETURN_IF_ERR(Float(body, "mirostat_eta", 0.0, 10.0, &s.mirostat_eta));
  RETURN_IF_ERR(Int(body, "min_keep", 0, 1 << 20, &s.min_keep));
  float dynatemp = 0;
  RETURN_IF_ERR(Float(body, "dynatemp_range", 0.0, 100.0, &dynatemp));
  if (dynatemp != 0)
    return ApiError::Unsupported("'dynatemp_range' other than 0 is not supported", "dynatemp_range");
  if (const json* v = Field(body, "samplers")) RETURN_IF_ERR(ParseSamplerOrder(*v, &s.stages));
  if (const json* v = Field(body, "logit_bias")) RETURN_IF_ERR(LogitBias(*v, out, limits));
  RETURN_IF_ERR(Int(body, "n_probs", 0, limits.top_logprobs, &out->n_probs));
  RETURN_IF_ERR(Constraint(body, out, limits));
  return std::nullopt;
}

}  // namespace rw::server
