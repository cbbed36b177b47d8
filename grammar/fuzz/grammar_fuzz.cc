// libFuzzer target (cmake -DREWIND_FUZZ=ON with clang): GBNF text and JSON schemas from any bytes. The parser
// must answer a grammar or an error within its limits (repetitions that explode, deep groups, long rule
// chains), never crash or grow past them; a grammar it accepts must run in the matcher. The first byte picks
// GBNF (even) or a JSON schema (odd).
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>

#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rw::grammar;
  if (size == 0) return 0;
  std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  GbnfLimits limits;
  limits.max_elements = 1 << 14;
  limits.max_rules = 1 << 10;
  std::string gbnf(text);
  if (data[0] & 1) {
    auto schema = nlohmann::ordered_json::parse(text.begin(), text.end(), nullptr, false);
    if (schema.is_discarded()) return 0;
    auto g = JsonSchemaToGbnf(schema);
    if (!g.ok()) return 0;
    gbnf = *g;
  }
  auto g = ParseGbnf(gbnf, "root", limits);
  if (!g.ok()) return 0;
  Matcher m(*g, 64);
  for (size_t i = 0; i < text.size() && i < 64; ++i) {
    if (!m.Advance(text.substr(i, 1))) break;
    (void)m.CanEnd();
  }
  return 0;
}
