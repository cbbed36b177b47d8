// A compiled GBNF grammar (llama.cpp's grammar format): rules made of alternatives made of elements, each
// element a character class or a reference to a rule. Repetitions and groups are expanded into anonymous
// rules at parse time, so the matcher only ever sees classes and references.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/expected.h"

namespace rw::grammar {

enum class Op : uint8_t {
  kEnd,    // end of the rule's last alternative
  kAlt,    // end of an alternative (another follows)
  kRef,    // value: rule id
  kClass,  // value: index into Grammar::classes
};

struct Element {
  Op op = Op::kEnd;
  uint32_t value = 0;
};

// A set of Unicode code points: ranges [lo, hi], or their complement.
struct CharClass {
  bool negated = false;
  std::vector<std::pair<uint32_t, uint32_t>> ranges;

  bool Matches(uint32_t cp) const;
  // Whether some code point in [lo, hi] matches (a partly decoded UTF-8 character).
  bool MatchesSome(uint32_t lo, uint32_t hi) const;
  // Whether every code point in [lo, hi] matches.
  bool MatchesAll(uint32_t lo, uint32_t hi) const;
};

struct Grammar {
  std::vector<Element> elements;            // every rule: alternative (kAlt alternative)* kEnd
  std::vector<std::vector<uint32_t>> alts;  // [rule] -> start position of each alternative
  std::vector<std::string> rule_names;      // [rule]
  std::vector<CharClass> classes;
  uint32_t root = 0;

  bool EndsAlternative(uint32_t pos) const {
    return elements[pos].op == Op::kEnd || elements[pos].op == Op::kAlt;
  }
};

// Bounds on what one grammar may expand into: repetitions copy their atom, so a short text can describe a huge
// grammar; the parser counts as it expands and stops at the first bound passed (OutOfRange), before the memory
// is spent.
struct GbnfLimits {
  size_t max_elements = size_t{1} << 20;  // elements of all rules (8 bytes each), counted while expanding
  size_t max_rules = size_t{1} << 16;     // rules, anonymous ones (groups, repetitions) included
  size_t max_nesting = 256;               // parenthesised groups inside one another
};

// Parses GBNF text (rules `name ::= ...`, literals with escapes, [classes], ., groups, * + ? {m,n}, #
// comments). Errors (InvalidArgument) name the problem and the position: syntax, undefined rules, a missing
// root, left recursion (which the matcher cannot run); OutOfRange when the grammar passes one of `limits`.
Expected<std::shared_ptr<const Grammar>> ParseGbnf(std::string_view text, std::string_view root = "root",
                                                   const GbnfLimits& limits = GbnfLimits());

}  // namespace rw::grammar
