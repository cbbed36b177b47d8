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
  // A string flag whose value may be left out (e.g. `-fa` alone or `-fa on`): without one, or when the next
  // argument is another flag, it takes `implicit`.
  void AddOptionalValue(const std::string& name, char short_name, std::string* value, const std::string& implicit,
                        const std::string& help);
  // Another spelling of a declared flag, written as given on the command line ("-np", "--n-gpu-layers"); a
  // bool flag's alias may negate it ("-nocb" for --no-cont-batching). Listed in the help.
  void Alias(const std::string& spelling, const std::string& name, bool negate = false);
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
    bool optional_value = false;
    std::string implicit_value;
    std::vector<std::string> aliases;
  };
  struct Pos {
    std::string name;
    std::string* value;
    std::string help;
    bool required;
  };
  struct AliasEntry {
    std::string spelling, name;
    bool negate;
  };
  Flag* Find(const std::string& name);
  Flag* FindShort(char c);

  std::string command_, summary_;
  std::vector<Flag> flags_;
  std::vector<Pos> positionals_;
  std::vector<AliasEntry> aliases_;
  bool help_requested_ = false;
};

// Parses "1 2 3" or "1,2,3" into ints.
Expected<std::vector<int32_t>> ParseIntList(const std::string& text);

}  // namespace rw
