#include "server/request_limits.h"

#include <utility>
#include <vector>

namespace rw::server {

using json = nlohmann::ordered_json;

std::string RequestLimits::Validate() const {
  const std::pair<const char*, int64_t> positive[] = {{"--max-json-values", json_values},
                                                      {"--max-json-members", json_members},
                                                      {"--max-grammar-elements", grammar_elements},
                                                      {"--max-grammar-rules", grammar_rules},
                                                      {"--max-schema-nodes", schema_nodes},
                                                      {"--max-schema-depth", schema_depth},
                                                      {"--max-dry-breaker-length", dry_breaker_length},
                                                      {"--max-stop-length", stop_length}};
  for (const auto& [flag, v] : positive)
    if (v < 1) return std::string(flag) + " must be at least 1";
  const std::pair<const char*, int64_t> counts[] = {{"--max-logit-bias", logit_bias},
                                                    {"--max-dry-breakers", dry_breakers},
                                                    {"--max-stop", stop},
                                                    {"--max-tools", tools}};
  for (const auto& [flag, v] : counts)
    if (v < 0) return std::string(flag) + " must be 0 or more";
  if (top_logprobs < 0 || top_logprobs > 20) return "--max-top-logprobs must be between 0 and 20";
  return "";
}

ApiError OverLimit(const std::string& field, const std::string& what, int64_t limit, const char* flag) {
  ApiError e = ApiError::BadRequest(
      "'" + field + "' " + what + "; this server allows at most " + std::to_string(limit) + " (" + flag + ")",
      field);
  e.code = "limit_exceeded";
  return e;
}

namespace {

// Counts as it goes and stops at the first limit passed (returning false ends sax_parse at once).
class ShapeCounter {
 public:
  using number_integer_t = json::number_integer_t;
  using number_unsigned_t = json::number_unsigned_t;
  using number_float_t = json::number_float_t;
  using string_t = json::string_t;
  using binary_t = json::binary_t;

  ShapeCounter(const RequestLimits& l, int max_depth) : limits_(l), max_depth_(max_depth) {}

  bool null() { return Value(); }
  bool boolean(bool) { return Value(); }
  bool number_integer(number_integer_t) { return Value(); }
  bool number_unsigned(number_unsigned_t) { return Value(); }
  bool number_float(number_float_t, const string_t&) { return Value(); }
  bool string(string_t&) { return Value(); }
  bool binary(binary_t&) { return Value(); }
  bool start_object(std::size_t) { return Open(true); }
  bool start_array(std::size_t) { return Open(false); }
  bool end_object() { return Close(); }
  bool end_array() { return Close(); }
  bool key(string_t& k) {
    Frame& f = stack_.back();
    f.key = k.size() > 64 ? k.substr(0, 64) + "..." : k;
    if (++f.members > limits_.json_members) {
      error_ = OverLimit(Path(), "has more than " + std::to_string(limits_.json_members) + " members",
                         limits_.json_members, "--max-json-members");
      return false;
    }
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) {
    error_ = ApiError::BadRequest("the request body is not valid JSON");
    return false;
  }

  std::optional<ApiError> error() const { return error_; }

 private:
  struct Frame {
    bool object = false;
    int64_t members = 0;
    std::string key;  // the member being read (objects)
  };

  bool Value() {
    if (++values_ > limits_.json_values) {
      error_ = OverLimit("body", "has more than " + std::to_string(limits_.json_values) + " JSON values",
                         limits_.json_values, "--max-json-values");
      error_->param = "";
      return false;
    }
    return true;
  }
  bool Open(bool object) {
    if (!Value()) return false;
    if (static_cast<int>(stack_.size()) >= max_depth_) {
      error_ = ApiError::BadRequest("the request body nests deeper than " + std::to_string(max_depth_) +
                                    " levels");
      return false;
    }
    stack_.push_back({object, 0, ""});
    return true;
  }
  bool Close() {
    stack_.pop_back();
    return true;
  }
  // The path of the object being read, e.g. "logit_bias" or "response_format.json_schema".
  std::string Path() const {
    std::string p;
    for (size_t i = 0; i + 1 < stack_.size(); ++i) {
      if (!stack_[i].object) continue;
      p += (p.empty() ? "" : ".") + stack_[i].key;
    }
    return p.empty() ? "body" : p;
  }

  const RequestLimits& limits_;
  int max_depth_;
  int64_t values_ = 0;
  std::vector<Frame> stack_;
  std::optional<ApiError> error_;
};

}  // namespace

std::optional<ApiError> CheckJsonShape(std::string_view body, const RequestLimits& limits, int max_depth) {
  ShapeCounter counter(limits, max_depth);
  if (json::sax_parse(body.begin(), body.end(), &counter)) return std::nullopt;
  if (auto e = counter.error()) return e;
  return ApiError::BadRequest("the request body is not valid JSON");
}

std::optional<ApiError> CheckSchemaSize(const json& schema, const RequestLimits& limits,
                                        const std::string& field, int64_t* nodes) {
  // Iterative, so the walk's own stack does not grow with the schema.
  std::vector<std::pair<const json*, int64_t>> todo = {{&schema, 1}};
  while (!todo.empty()) {
    auto [v, depth] = todo.back();
    todo.pop_back();
    if (++*nodes > limits.schema_nodes)
      return OverLimit(field, "has more than " + std::to_string(limits.schema_nodes) + " schema nodes",
                       limits.schema_nodes, "--max-schema-nodes");
    if (depth > limits.schema_depth)
      return OverLimit(field, "nests deeper than " + std::to_string(limits.schema_depth) + " levels",
                       limits.schema_depth, "--max-schema-depth");
    if (v->is_structured())
      for (const auto& child : *v) todo.push_back({&child, depth + 1});
  }
  return std::nullopt;
}

}  // namespace rw::server
