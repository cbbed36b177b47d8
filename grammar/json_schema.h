// JSON Schema -> GBNF. The grammar generates only JSON documents that validate against the schema; a schema
// feature the grammar cannot guarantee (pattern, uniqueItems, allOf, not, if/then, min/maxProperties, unknown
// formats, ...) is an InvalidArgument error naming it, never silently ignored.
//
// Supported: type (one or a list), enum, const, anyOf/oneOf (oneOf as anyOf), $ref to #/$defs/... and
// #/definitions/..., object (properties, required, additionalProperties: false | true | schema), array
// (items, prefixItems, minItems, maxItems), string (minLength, maxLength, format: date | time | date-time |
// uuid), integer (minimum, maximum, exclusiveMinimum, exclusiveMaximum), number (no bounds), boolean, null,
// and the annotations (title, description, default, examples, $schema, $id, $comment) which change nothing.
// Objects are written with their properties in schema order, required ones always, optional ones or not.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "base/expected.h"

namespace rw::grammar {

// Builds GBNF rules for several schemas into one grammar (tool calls put one per tool into the same grammar).
class SchemaConverter {
 public:
  // `root_schema` resolves "#/..." references of `schema`.
  Expected<std::string> Rule(const nlohmann::ordered_json& schema, const std::string& name,
                             const nlohmann::ordered_json& root_schema);
  // Adds a rule with the given body (GBNF), returns its name (a fresh one if taken).
  std::string Add(const std::string& name, const std::string& body);
  // The GBNF text of all rules so far, the shared JSON primitives included.
  std::string Gbnf() const;

  // Any JSON value / object (response_format json_object).
  std::string AnyValue();
  std::string AnyObject();

 private:
  Expected<std::string> Visit(const nlohmann::ordered_json& schema, const std::string& name, int depth);
  Expected<std::string> Object(const nlohmann::ordered_json& schema, const std::string& name, int depth);
  Expected<std::string> Array(const nlohmann::ordered_json& schema, const std::string& name, int depth);
  Expected<std::string> String(const nlohmann::ordered_json& schema, const std::string& name);
  Expected<std::string> Integer(const nlohmann::ordered_json& schema, const std::string& name);
  std::string Primitive(const std::string& name);

  const nlohmann::ordered_json* root_ = nullptr;
  std::map<std::string, std::string> rules_;  // name -> body
  std::map<std::string, std::string> refs_;   // "$ref" -> rule name
};

// The whole grammar for one schema (root rule "root").
Expected<std::string> JsonSchemaToGbnf(const nlohmann::ordered_json& schema);
// The JSON literal grammar of a string (quoted, escaped as JSON).
std::string GbnfLiteral(const std::string& text);

}  // namespace rw::grammar
