// Command-line flags declared once: name, short alias, default (the variable's initial value), help.
// `--help` prints every flag with its default.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/expected.h"

namespace rw {

class FlagSet {
 public:
  FlagSet(std::string command, std::string summary) : command_(std::move(command)), summary_(std::move(summary)) {}

  // Each binds a variable; its value at declaration time is the documented default.
  void Add(const std::string& name, char short_name, std::string* value, const std::string& help);
  void Add(const std::string& name, char short_name, int64_t* value, const std::string& help);
  void Add(const std::string& name, char short_name, int* value, const std::string& help);
  void Add(const std::string& name, char short_name, double* value, const std::string& help);
  void Add(const std::string& name, char short_name, bool* value, const std::string& help);  // --x / --no-x / --x=false
  // A multi-letter single-dash spelling of a declared flag, as llama-server has them: Alias("ctk",
  // "cache-type-k") makes -ctk VALUE mean --cache-type-k VALUE.
  void Alias(const std::string& spelling, const std::string& name);
  // Positional arguments in order; optional ones must come last.
  void Positional(const std::string& name, std::string* value, const std::string& help, bool required);

  // Parses argv[first..argc). On `--help` sets help_requested() and returns ok.
  Status Parse(int argc, char** argv, int first = 1);
  bool help_requested() const { return help_requested_; }
  // True if the flag was given on the command line.
  bool IsSet(const std::string& name) const;
  std::string Help() const;

 private:
  struct Flag {
    std::string name;
    char short_name = 0;
    std::string help;
    std::string default_text;
    bool is_bool = false;
    bool set = false;
    std::function<Status(const std::string&)> assign;
  };
  struct Pos {
    std::string name;
    std::string* value;
    std::string help;
    bool required;
  };
  Flag* Find(const std::string& name);
  Flag* FindShort(char c);
  Flag* FindAlias(const std::string& spelling);

  std::string command_, summary_;
  std::vector<Flag> flags_;
  std::vector<Pos> positionals_;
  std::vector<std::pair<std::string, std::string>> aliases_;  // (spelling without '-', flag name)
  bool help_requested_ = false;
};

// Parses "1 2 3" or "1,2,3" into ints.
Expected<std::vector<int32_t>> ParseIntList(const std::string& text);

}  // namespace rw
